// The fast seam: every seam stream between two nodes on one byte stream (a TCP connection),
// each message a 9-byte header (body length u32 LE, channel u32 LE, kind u8) and then the Seam
// Frame's own bytes. No HTTP/2 framing, no per-stream flow control: a node bounds what each
// session may queue (`overloaded`), so a stream cannot run away with a peer's memory.
// Runtime-agnostic: a host hands in its socket as a ByteDuplex.
import type { SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";
import { AsyncQueue } from "./async-queue.ts";
import { noteCodec } from "./codec-time.ts";
import { SeamError } from "./errors.ts";
import { encodeFrame } from "./frame.ts";
import { frameFromBinary } from "./frame-wire.ts";
import { MAX_FRAME_BYTES } from "./limits.ts";
import type { FrameTap, SeamLink, SeamServe } from "./link.ts";

const ascii = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));
/**
 * What a dialer sends first. As long as HTTP/2's connection preface (24 bytes), so a gRPC-only
 * server reads all of it, finds no HTTP/2 and hangs up at once instead of waiting for more.
 */
export const FAST_PREFACE = ascii("STRATA-SEAM/1 fast seam\n");
/** The listener's answer: it speaks the fast seam. */
export const FAST_ACCEPT = ascii("STRATA-SEAM/1 ok\n");

/** Whether bytes read so far start with `expected`, do not, or are too few to tell. */
export function opensWith(head: Uint8Array, expected: Uint8Array): "yes" | "other" | "more" {
  const n = Math.min(head.length, expected.length);
  if (!head.subarray(0, n).every((b, i) => b === expected[i])) return "other";
  return head.length < expected.length ? "more" : "yes";
}

/**
 * Sends `preface` and waits for the listener's `accept`. Rejects (and closes the connection)
 * when it answers anything else, hangs up, or says nothing within `timeoutMs`. Once accepted,
 * every byte after `accept` goes to `take`, and the connection's end to `lost`.
 */
export function speakFirst(
  duplex: ByteDuplex,
  preface: Uint8Array,
  accept: Uint8Array,
  o: {
    timeoutMs: number;
    refused(why: string): Error;
    take(chunk: Uint8Array): void;
    lost(why: string): void;
  },
): Promise<void> {
  return new Promise((resolve, reject) => {
    let got = new Uint8Array(0);
    let state: "waiting" | "accepted" | "refused" = "waiting";
    const timer = setTimeout(() => refuse("no answer"), o.timeoutMs);
    function refuse(why: string) {
      if (state !== "waiting") return;
      state = "refused";
      clearTimeout(timer);
      reject(o.refused(why));
      duplex.close();
    }
    duplex.onClose((why) => (state === "accepted" ? o.lost(why) : refuse(why)));
    duplex.onData((chunk) => {
      if (state === "accepted") return o.take(chunk);
      if (state === "refused") return;
      const joined = new Uint8Array(got.length + chunk.length);
      joined.set(got);
      joined.set(chunk, got.length);
      got = joined;
      const answer = opensWith(got, accept);
      if (answer === "other") return refuse("another protocol answered");
      if (answer === "more") return;
      state = "accepted";
      clearTimeout(timer);
      resolve();
      if (got.length > accept.length) o.take(got.subarray(accept.length));
    });
    duplex.write([preface]);
  });
}

/** The little the fast seam needs from a connection. */
export interface ByteDuplex {
  /** Writes the parts back to back, in one go where the runtime can (no copy to join them). */
  write(parts: readonly Uint8Array[]): void;
  /**
   * `reusable`, where the handler gives it, says whether the buffer a chunk came in may be
   * written again: nothing the handler holds or handed on views it. A host may then read into it
   * again instead of a fresh one (where every handler says so).
   */
  onData(handler: (chunk: Uint8Array) => void, reusable?: (buffer: ArrayBufferLike) => boolean): void;
  /** Called once when the connection ends or fails. */
  onClose(handler: (why: string) => void): void;
  close(): void;
  /** Stops handing over data until `resume` (the peer then meets TCP's backpressure). */
  pause?(): void;
  resume?(): void;
}

/** What one peer's fast-seam connection may hold at a node: past it, that peer alone waits or is refused. */
export const MUX_LIMITS = {
  /** streams open at once; another is refused with resource_exhausted */
  channels: 1024,
  /** bytes of frames that came and the node has not taken yet: past it the connection is not
   *  read until the node catches up (one frame at the limit always fits) */
  queuedBytes: MAX_FRAME_BYTES + (16 << 20),
} as const;

const DATA = 1;
const END = 2; // the sender sends nothing more on this channel
const ERROR = 3; // the sender tore the channel down; the body says why
const OPEN = 4; // a dialer's new channel: sent at dial, so channels start in the order numbered
const HEADER = 9;

/**
 * Splits a byte stream into messages; a body past the frame limit is skipped, never held. A
 * body that spans chunks is kept as views of them until it is whole, then joined once: what is
 * held is what came, so a header announcing 64 MB and nothing after it costs nothing, and a
 * large body costs one copy, not a buffer doubled (and copied) as its bytes came, whose
 * garbage a flood of large frames would pile up faster than it is collected (exported for its
 * test).
 */
export class MessageReader {
  readonly #head = new Uint8Array(HEADER);
  #headAt = 0;
  /** the body under way: views of the chunks its bytes came in */
  #parts?: Uint8Array[];
  /** small pieces of a body are copied here, so that a peer's trickle costs no view per byte */
  #tail?: Uint8Array;
  #tailAt = 0;
  #bodyLen = 0;
  #bodyAt = 0;
  #skip = 0;
  #channel = 0;
  #kind = 0;
  /** buffers a message was handed on as a view of: never to be written again */
  readonly #escaped = new WeakSet<ArrayBufferLike>();

  constructor(
    private readonly onMessage: (channel: number, kind: number, body: Uint8Array) => void,
    private readonly onOversize: (channel: number, bytes: number) => void,
  ) {}

  /**
   * Whether the bytes of `buffer` are no longer needed: no message was handed on as a view of
   * it, and the body under way holds none of it. (A body that spans chunks is handed on as a
   * copy, so a flood of large frames leaves its read buffers free to be read into again instead
   * of garbage for the collector to catch up with.)
   */
  reusable(buffer: ArrayBufferLike): boolean {
    return !this.#escaped.has(buffer) && !this.#parts?.some((p) => p.buffer === buffer);
  }

  #hand(body: Uint8Array): void {
    if (body.length) this.#escaped.add(body.buffer);
    this.onMessage(this.#channel, this.#kind, body);
  }

  /** Bytes held for the body under way. */
  get held(): number {
    return this.#parts ? this.#bodyAt : 0;
  }

  push(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, chunk.length - at);
        this.#skip -= n;
        at += n;
        continue;
      }
      if (this.#parts) {
        const n = Math.min(this.#bodyLen - this.#bodyAt, chunk.length - at);
        this.#keep(this.#parts, chunk.subarray(at, at + n));
        this.#bodyAt += n;
        at += n;
        if (this.#bodyAt === this.#bodyLen) {
          const parts = this.#parts;
          this.#parts = undefined;
          this.#hand(joined(parts, this.#bodyLen));
        }
        continue;
      }
      if (this.#headAt === 0 && chunk.length - at >= HEADER) {
        // the usual case: the header, and often the whole body, inside one chunk
        at = this.#start(chunk, at, chunk);
        continue;
      }
      const n = Math.min(HEADER - this.#headAt, chunk.length - at);
      this.#head.set(chunk.subarray(at, at + n), this.#headAt);
      this.#headAt += n;
      at += n;
      if (this.#headAt === HEADER) {
        this.#headAt = 0;
        this.#start(this.#head, 0, chunk.subarray(0, 0));
      }
    }
  }

  /** Adds a piece of the body: as a view, joined to the last where it follows it in memory (a
   *  slab's reads do); a small one copied into the tail buffer. */
  #keep(parts: Uint8Array[], piece: Uint8Array): void {
    let view = piece;
    if (piece.length < SMALL_PIECE) {
      if (!this.#tail || this.#tailAt + piece.length > this.#tail.length) {
        this.#tail = new Uint8Array(Math.min(TAIL_BYTES, this.#bodyLen - this.#bodyAt));
        this.#tailAt = 0;
      }
      this.#tail.set(piece, this.#tailAt);
      view = this.#tail.subarray(this.#tailAt, this.#tailAt + piece.length);
      this.#tailAt += piece.length;
    }
    const last = parts.at(-1);
    if (last && last.buffer === view.buffer && last.byteOffset + last.length === view.byteOffset) {
      parts[parts.length - 1] = new Uint8Array(last.buffer, last.byteOffset, last.length + view.length);
    } else parts.push(view);
  }

  /** Reads a header at `head[h..]`; a body wholly inside `chunk` after it is taken as a view. */
  #start(head: Uint8Array, h: number, chunk: Uint8Array): number {
    const v = new DataView(head.buffer, head.byteOffset + h, HEADER);
    const len = v.getUint32(0, true);
    this.#channel = v.getUint32(4, true);
    this.#kind = v.getUint8(8);
    const at = head === chunk ? h + HEADER : 0;
    if (len > MAX_FRAME_BYTES) {
      this.#skip = len;
      this.onOversize(this.#channel, len);
      return at;
    }
    if (head === chunk && chunk.length - at >= len) {
      this.#hand(chunk.subarray(at, at + len));
      return at + len;
    }
    if (len === 0) {
      this.onMessage(this.#channel, this.#kind, new Uint8Array(0));
      return at;
    }
    this.#parts = [];
    this.#tail = undefined;
    this.#bodyLen = len;
    this.#bodyAt = 0;
    return at;
  }
}

/** A body's piece smaller than this is copied rather than kept as a view. */
const SMALL_PIECE = 4 << 10;
const TAIL_BYTES = 64 << 10;

function joined(parts: readonly Uint8Array[], len: number): Uint8Array {
  if (parts.length === 1) return parts[0];
  const body = new Uint8Array(len);
  let at = 0;
  for (const p of parts) (body.set(p, at), (at += p.length));
  return body;
}

/** One message on the wire: its header and body as two parts (written together, never joined).
 *  (Tracker calls on their own connection use the same messages: src/tracker/wire/calls-wire.ts.) */
export function sendMessage(duplex: ByteDuplex, channel: number, kind: number, body: Uint8Array): void {
  const head = new Uint8Array(HEADER);
  const v = new DataView(head.buffer);
  v.setUint32(0, body.length, true);
  v.setUint32(4, channel, true);
  v.setUint8(8, kind);
  duplex.write(body.length ? [head, body] : [head]);
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const utf8 = (s: string) => new TextEncoder().encode(s);

/** Frame bytes from a peer: the node checks the rest; bytes that are no frame fail the stream. */
function decode(bytes: Uint8Array): SeamFrame {
  const t0 = performance.now();
  let f: SeamFrame;
  try {
    f = frameFromBinary(bytes);
  } catch (e) {
    throw new SeamError("malformed", `not a seam frame: ${e instanceof Error ? e.message : e}`);
  }
  noteCodec(f, performance.now() - t0);
  return f;
}

function encode(frame: SeamFrame, tap?: FrameTap): Uint8Array {
  const t0 = performance.now();
  const bytes = encodeFrame(frame);
  noteCodec(frame, performance.now() - t0);
  tap?.(bytes, frame);
  return bytes;
}

/** The dialing side of one connection: seam streams to the node at its other end. */
export class MuxClient {
  readonly #channels = new Map<number, AsyncQueue<SeamFrame>>();
  #next = 0;
  #closed?: string;
  readonly #reader = new MessageReader(
    (ch, kind, body) => this.#message(ch, kind, body),
    (ch, bytes) => this.#failChannel(ch, new SeamError("too_large", `a reply of ${bytes} bytes`)),
  );

  private constructor(
    private readonly duplex: ByteDuplex,
    private readonly tap?: FrameTap,
    private readonly transport: "tcp" | "tls" = "tcp",
  ) {}

  /**
   * Speaks first and waits for the listener to accept the fast seam. Rejects when it answers
   * anything else (a gRPC-only node), hangs up, or says nothing within `timeoutMs`.
   */
  static connect(
    duplex: ByteDuplex,
    o: { tap?: FrameTap; timeoutMs?: number; transport?: "tcp" | "tls" } = {},
  ): Promise<MuxClient> {
    const c = new MuxClient(duplex, o.tap, o.transport);
    return speakFirst(duplex, FAST_PREFACE, FAST_ACCEPT, {
      timeoutMs: o.timeoutMs ?? 5_000,
      refused: (why) => new SeamError("unavailable", `the fast seam was not accepted: ${why}`),
      take: (chunk) => c.#reader.push(chunk),
      lost: (why) => c.#lost(why),
    }).then(() => c);
  }

  get closed(): boolean {
    return this.#closed !== undefined;
  }

  dial(): SeamLink {
    if (this.#closed) throw new SeamError("unavailable", this.#closed);
    const channel = ++this.#next;
    const replies = new AsyncQueue<SeamFrame>();
    this.#channels.set(channel, replies);
    let sending = true;
    const duplex = this.duplex;
    sendMessage(duplex, channel, OPEN, new Uint8Array(0));
    return {
      transport: this.transport,
      send: (frame) => {
        if (!sending || this.#closed) return false;
        sendMessage(duplex, channel, DATA, encode(frame, this.tap));
        return true;
      },
      replies,
      close: () => {
        if (!sending) return;
        sending = false;
        if (!this.#closed) sendMessage(duplex, channel, END, new Uint8Array(0));
      },
      abort: (reason) => {
        const open = this.#channels.delete(channel);
        if (open && !this.#closed) sendMessage(duplex, channel, ERROR, utf8(reason));
        sending = false;
        replies.end();
      },
    };
  }

  close(): void {
    this.#lost("closed by this node");
    this.duplex.close();
  }

  #message(channel: number, kind: number, body: Uint8Array): void {
    const replies = this.#channels.get(channel);
    if (!replies) return; // a channel this side gave up on
    if (kind === DATA) {
      try {
        replies.push(decode(body));
      } catch (e) {
        this.#failChannel(channel, e);
        sendMessage(this.duplex, channel, ERROR, utf8("undecodable reply"));
      }
    } else if (kind === END) {
      this.#channels.delete(channel);
      replies.end();
    } else {
      this.#failChannel(channel, new SeamError("unavailable", text(body) || "the peer ended the stream"));
    }
  }

  #failChannel(channel: number, e: unknown): void {
    const replies = this.#channels.get(channel);
    this.#channels.delete(channel);
    replies?.fail(e);
  }

  #lost(why: string): void {
    if (this.#closed) return;
    this.#closed = `the fast seam connection closed: ${why}`;
    for (const [, q] of this.#channels) q.fail(new SeamError("unavailable", this.#closed));
    this.#channels.clear();
  }
}

/**
 * Serves the seam streams a dialer opens on one accepted connection (whose preface the
 * listener already took; `head` is whatever came after it); `transport`: TCP, or TLS under it.
 */
export function serveMux(
  duplex: ByteDuplex,
  serve: SeamServe,
  head: Uint8Array,
  tap?: FrameTap,
  transport: "tcp" | "tls" = "tcp",
  limits: { channels: number; queuedBytes: number } = MUX_LIMITS,
): void {
  const open = new Map<number, AsyncQueue<SeamFrame>>();
  // frames that came and wait for the node, in bytes: over the limit, reading stops
  let queued = 0;
  let paused = false;
  const took = (bytes: number) => {
    queued -= bytes;
    if (paused && queued <= limits.queuedBytes) {
      paused = false;
      duplex.resume?.();
    }
  };
  // channels are opened in the order the dialer numbers them: one at or below this has been opened
  let highest = 0;
  let closed = false;
  const fail = (channel: number, e: unknown) => {
    const q = open.get(channel);
    open.delete(channel);
    q?.fail(e);
  };
  const sizes = new Map<number, number[]>();
  const start = (channel: number) => {
    highest = channel;
    if (open.size >= limits.channels) {
      const why = `${open.size} streams are open on this connection, the most a peer may have`;
      sendMessage(duplex, channel, ERROR, new TextEncoder().encode(`resource_exhausted: ${why}`));
      return;
    }
    // each frame leaves the count of waiting bytes as the node takes it
    const waiting: number[] = [];
    const frames = new AsyncQueue<SeamFrame>(() => took(waiting.shift() ?? 0));
    open.set(channel, frames);
    sizes.set(channel, waiting);
    let served = true;
    const reply = (f: SeamFrame) => {
      if (served && !closed) sendMessage(duplex, channel, DATA, encode(f, tap));
    };
    void serve(frames, reply, transport).catch(() => {}).finally(() => {
      served = false;
      open.delete(channel);
      sizes.delete(channel);
      took(waiting.splice(0).reduce((n, b) => n + b, 0));
      if (!closed) sendMessage(duplex, channel, END, new Uint8Array(0));
    });
    return frames;
  };
  const reader = new MessageReader(
    (channel, kind, body) => {
      if (kind === OPEN) {
        if (channel > highest) start(channel);
        return;
      }
      const frames = open.get(channel);
      if (!frames) return; // a channel that has ended (or never opened)
      if (kind === DATA) {
        try {
          const f = decode(body);
          // counted before the push: a consumer waiting takes it at once
          sizes.get(channel)?.push(body.length);
          queued += body.length;
          if (!frames.push(f)) took(sizes.get(channel)?.pop() ?? 0);
          else if (!paused && queued > limits.queuedBytes && duplex.pause) {
            paused = true;
            duplex.pause();
          }
        } catch (e) {
          fail(channel, e);
        }
      } else if (kind === END) frames.end();
      else fail(channel, new SeamError("unavailable", text(body) || "the dialer tore the stream down"));
    },
    (channel, bytes) =>
      fail(channel, new SeamError("too_large", `a frame of ${bytes} bytes exceeds ${MAX_FRAME_BYTES}`)),
  );
  duplex.onClose((why) => {
    closed = true;
    for (const [, q] of open) q.fail(new SeamError("unavailable", `the fast seam connection closed: ${why}`));
    open.clear();
  });
  duplex.onData((chunk) => reader.push(chunk), (buffer) => reader.reusable(buffer));
  duplex.write([FAST_ACCEPT]);
  if (head.length) reader.push(head);
}
