// A client's HTTP/2 bytes with its GOAWAY frames taken out, before they reach Deno's HTTP/2
// server. Deno 2.9's node:http2 server aborts the whole process (an nghttp2 assertion, or
// free() of an invalid pointer) when a client that has made more than a few dozen calls on a
// connection sends GOAWAY, which every HTTP/2 client does when it closes politely (connect-node's
// session manager after 15 idle minutes, or on close). Without the frame the server sees the
// client's socket end instead, which it handles (docs/seams.md, "Pitfall: Deno's HTTP/2 server").

import { concatBytes } from "../../src/bytes/concat.ts";

/** The client connection preface (RFC 9113 §3.4): 24 bytes before the first frame. */
const PREFACE_BYTES = 24;
const FRAME_HEADER_BYTES = 9;
const GOAWAY = 0x7;

/**
 * Passes a client's byte stream on frame by frame, less any GOAWAY frame. A frame header cut
 * across chunks is held until it is whole, so no part of a dropped frame is ever passed on.
 */
export class GoawayStrip {
  #prefaceLeft = PREFACE_BYTES;
  /** a frame header cut by a chunk's end, held until its type is known */
  readonly #held = new Uint8Array(FRAME_HEADER_BYTES);
  #heldHave = 0;
  /** payload bytes of the current frame still to come, and whether they are passed on */
  #payloadLeft = 0;
  #passPayload = true;
  /** GOAWAY frames taken out so far */
  stripped = 0;

  /** What of `chunk` to pass on: the chunk itself unless a frame was cut out or a header held. */
  take(chunk: Uint8Array): Uint8Array {
    const out: Uint8Array[] = [];
    let at = 0;
    /** where the run of bytes passed straight through began */
    let from = 0;
    const endRun = (to: number) => {
      if (to > from) out.push(chunk.subarray(from, to));
    };
    /** a frame's header read: its payload passes unless it is a GOAWAY */
    const frame = (h: Uint8Array, i: number) => {
      this.#payloadLeft = (h[i] << 16) | (h[i + 1] << 8) | h[i + 2];
      this.#passPayload = h[i + 3] !== GOAWAY;
      if (!this.#passPayload) this.stripped++;
    };
    while (at < chunk.length) {
      const left = chunk.length - at;
      if (this.#prefaceLeft > 0) {
        const n = Math.min(this.#prefaceLeft, left);
        this.#prefaceLeft -= n;
        at += n;
      } else if (this.#payloadLeft > 0) {
        const n = Math.min(this.#payloadLeft, left);
        this.#payloadLeft -= n;
        if (!this.#passPayload) {
          endRun(at);
          from = at + n;
        }
        at += n;
      } else if (this.#heldHave === 0 && left >= FRAME_HEADER_BYTES) {
        frame(chunk, at);
        if (!this.#passPayload) {
          endRun(at);
          from = at + FRAME_HEADER_BYTES;
        }
        at += FRAME_HEADER_BYTES;
      } else {
        // a header cut by this chunk's end, or the rest of one held from the last chunk
        if (this.#heldHave === 0) endRun(at);
        const n = Math.min(FRAME_HEADER_BYTES - this.#heldHave, left);
        this.#held.set(chunk.subarray(at, at + n), this.#heldHave);
        this.#heldHave += n;
        at += n;
        from = at;
        if (this.#heldHave < FRAME_HEADER_BYTES) break;
        this.#heldHave = 0;
        frame(this.#held, 0);
        if (this.#passPayload) out.push(this.#held.slice());
      }
    }
    endRun(at);
    return concatBytes(out);
  }
}
