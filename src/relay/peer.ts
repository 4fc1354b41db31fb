// One peer's connection to a relay, multiplexing seam streams as channels: streams it
// opens to other peers (dial) and streams other peers open to it (serve). The same Seam
// Frame bytes as on a direct seam ride inside relay envelopes. Runtime-agnostic: a Deno
// node and a browser tab plug in their own WebSocket.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Kind, PieceRequestSchema } from "../gen/strata/relay/v1/relay_pb.ts";
import type { SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";
import { SeamError } from "../seam/errors.ts";
import { decodeFrame, decodeReply, encodeFrame } from "../seam/frame.ts";
import type { FrameTap, SeamLink, SeamServe } from "../seam/link.ts";
import { AsyncQueue } from "../seam/async-queue.ts";
import { decodeEnvelope, encodeEnvelope } from "./envelope.ts";

/** The little a relay peer needs from a WebSocket. */
export interface RelaySocket {
  send(bytes: Uint8Array): void;
  close(): void;
  onMessage(handler: (bytes: Uint8Array) => void): void;
  onClose(handler: (why: string) => void): void;
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** Dials the relay again after a drop (a tab's connection: it comes back by itself). */
export interface Redial {
  connect(): Promise<RelaySocket>;
  /** told each time the connection is back (or, with an error, each failed try) */
  onChange?(state: "down" | "up", detail: string): void;
  /** the first wait, doubled after each failed try up to maxWaitMs (default 500 and 15000) */
  readonly firstWaitMs?: number;
  readonly maxWaitMs?: number;
}

/** Answers another peer's request for a piece of the artifact (undefined: not held here). */
export type PieceServe = (offset: number, size: number) => Promise<Uint8Array | undefined>;

export class RelayPeer {
  readonly #dialed = new Map<string, { to: string; replies: AsyncQueue<SeamFrame> }>();
  readonly #served = new Map<string, AsyncQueue<SeamFrame>>();
  /** piece requests this peer sent, by channel */
  readonly #asked = new Map<
    string,
    { to: string; resolve: (b: Uint8Array) => void; reject: (e: Error) => void }
  >();
  #serve?: SeamServe;
  #pieces?: PieceServe;
  #channels = 0;
  /** closed for good */
  #closed?: string;
  /** the connection dropped and is being dialed again: nothing goes out meanwhile */
  #down?: string;
  #socket!: RelaySocket;
  /** which connection this is: a stream belongs to the one it was opened on */
  #generation = 0;

  /** `redial`: after a drop, connect again (with backoff) and go on serving under the same name;
   *  streams open at the drop fail, as they would on any lost connection */
  constructor(
    socket: RelaySocket,
    readonly name: string,
    private readonly tap?: FrameTap,
    private readonly redial?: Redial,
  ) {
    this.#attach(socket);
  }

  get socket(): RelaySocket {
    return this.#socket;
  }

  #attach(socket: RelaySocket): void {
    this.#socket = socket;
    this.#generation++;
    // a dropped socket's late events are not this connection's
    socket.onMessage((bytes) => socket === this.#socket && this.#receive(bytes));
    socket.onClose((why) => socket === this.#socket && this.#dropped(`relay connection closed: ${why}`));
  }

  /** Nothing goes out on a closed or dropped connection (its close event says what happened). */
  #send(bytes: Uint8Array): void {
    if (!this.#closed && !this.#down) this.#socket.send(bytes);
  }

  #dropped(why: string): void {
    if (this.#closed) return;
    if (!this.redial) return this.#lost(why);
    this.#failStreams(why);
    this.#down = why;
    this.redial.onChange?.("down", why);
    void this.#reconnect(this.redial);
  }

  async #reconnect(r: Redial): Promise<void> {
    let wait = r.firstWaitMs ?? 500;
    while (!this.#closed) {
      await new Promise((ok) => setTimeout(ok, wait));
      if (this.#closed) return;
      try {
        const socket = await r.connect();
        if (this.#closed) return socket.close();
        this.#down = undefined;
        this.#attach(socket);
        r.onChange?.("up", `reconnected as ${this.name}`);
        return;
      } catch (e) {
        r.onChange?.("down", errorText(e));
        wait = Math.min(wait * 2, r.maxWaitMs ?? 15_000);
      }
    }
  }

  /** Streams other peers open to this one are served by `serve`. */
  listen(serve: SeamServe): void {
    this.#serve = serve;
  }

  /** Pieces of the artifact other peers ask this one for are served by `serve`. */
  servePieces(serve: PieceServe): void {
    this.#pieces = serve;
  }

  /** One piece of the artifact from the peer named `to` (its bytes, unchecked: check them). */
  getPiece(to: string, offset: number, size: number, timeoutMs = 60_000): Promise<Uint8Array> {
    const gone = this.#closed ?? this.#down;
    if (gone) return Promise.reject(new SeamError("unavailable", gone));
    const channel = `${this.name}-p${++this.#channels}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#asked.delete(channel);
        reject(new SeamError("deadline", `no piece from ${to} within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = <T>(f: (v: T) => void) => (v: T) => {
        clearTimeout(timer);
        this.#asked.delete(channel);
        f(v);
      };
      this.#asked.set(channel, { to, resolve: done(resolve), reject: done(reject) });
      const req = toBinary(PieceRequestSchema, create(PieceRequestSchema, { offset: BigInt(offset), size }));
      this.#send(encodeEnvelope({ to, channel, kind: Kind.PIECE_GET }, req));
    });
  }

  /** Opens a seam stream to the peer named `to`. */
  dial(to: string): SeamLink {
    const gone = this.#closed ?? this.#down;
    if (gone) throw new SeamError("unavailable", gone);
    const channel = `${this.name}-${++this.#channels}`;
    const replies = new AsyncQueue<SeamFrame>();
    this.#dialed.set(channel, { to, replies });
    this.#send(encodeEnvelope({ to, channel, kind: Kind.OPEN }));
    let open = true;
    // closed by us: no more frames go out, the peer's replies still come in
    let sending = true;
    const generation = this.#generation;
    const end = (kind: Kind, error = "") => {
      sending = false;
      if (!open) return;
      open = false;
      this.#dialed.delete(channel);
      this.#send(encodeEnvelope({ to, channel, kind, error }));
    };
    return {
      transport: "relay",
      send: (frame) => {
        if (!sending || this.#closed || this.#down || generation !== this.#generation) return false;
        const bytes = encodeFrame(frame);
        this.tap?.(bytes, frame);
        this.#send(encodeEnvelope({ to, channel, kind: Kind.DATA }, bytes));
        return true;
      },
      replies,
      // the peer's replies may still come after our side is done sending
      close: () => {
        if (!sending) return;
        sending = false;
        if (open) this.#send(encodeEnvelope({ to, channel, kind: Kind.CLOSE }));
      },
      abort: (reason) => {
        end(Kind.ERROR, reason);
        replies.end();
      },
    };
  }

  close(): void {
    this.#lost("closed by this peer");
    this.#socket.close();
  }

  #receive(bytes: Uint8Array): void {
    let env;
    try {
      env = decodeEnvelope(bytes);
    } catch {
      return; // the relay only forwards well-formed envelopes; nothing to answer
    }
    const { header: h, payload } = env;
    const servedKey = `${h.from}\u0000${h.channel}`;
    const served = this.#served.get(servedKey);
    const dialed = this.#dialed.get(h.channel);
    switch (h.kind) {
      case Kind.OPEN:
        this.#open(h.from, h.channel, servedKey);
        return;
      case Kind.DATA:
        if (served) {
          try {
            served.push(decodeFrame(payload));
          } catch (e) {
            // bytes that are no frame end this stream (and only this one) with the reason
            this.#send(
              encodeEnvelope({ to: h.from, channel: h.channel, kind: Kind.ERROR, error: errorText(e) }),
            );
            served.fail(e);
            this.#served.delete(servedKey);
          }
        } else if (dialed && dialed.to === h.from) {
          try {
            dialed.replies.push(decodeReply(payload));
          } catch (e) {
            dialed.replies.fail(e);
          }
        }
        return;
      case Kind.CLOSE:
        served?.end();
        if (dialed && dialed.to === h.from) {
          dialed.replies.end();
          // the peer is done too: the channel is over both ways
          this.#dialed.delete(h.channel);
        }
        return;
      case Kind.PIECE_GET:
        void this.#answerPiece(h.from, h.channel, payload);
        return;
      case Kind.PIECE: {
        const asked = this.#asked.get(h.channel);
        if (asked && asked.to === h.from) asked.resolve(payload.slice());
        return;
      }
      case Kind.ERROR:
        if (this.#asked.get(h.channel)?.to === h.from) {
          this.#asked.get(h.channel)!.reject(new SeamError("unavailable", h.error));
        }
        served?.fail(new SeamError("unavailable", h.error));
        this.#served.delete(servedKey);
        if (dialed && dialed.to === h.from) {
          dialed.replies.fail(new SeamError("unavailable", h.error));
          this.#dialed.delete(h.channel);
        }
        return;
    }
  }

  async #answerPiece(from: string, channel: string, payload: Uint8Array): Promise<void> {
    const refuse = (error: string) =>
      this.#send(encodeEnvelope({ to: from, channel, kind: Kind.ERROR, error }));
    let req;
    try {
      req = fromBinary(PieceRequestSchema, payload);
    } catch (e) {
      return refuse(`not a piece request: ${errorText(e)}`);
    }
    if (!this.#pieces) return refuse(`${this.name} serves no pieces`);
    try {
      const bytes = await this.#pieces(Number(req.offset), req.size);
      if (this.#closed) return;
      if (!bytes) return refuse(`${this.name} holds no piece at ${req.offset}`);
      this.#send(encodeEnvelope({ to: from, channel, kind: Kind.PIECE }, bytes));
    } catch (e) {
      refuse(errorText(e));
    }
  }

  #open(from: string, channel: string, key: string): void {
    if (!this.#serve || this.#served.has(key)) {
      const error = this.#serve ? `channel ${channel} is already open` : `${this.name} serves no seams`;
      this.#send(encodeEnvelope({ to: from, channel, kind: Kind.ERROR, error }));
      return;
    }
    const frames = new AsyncQueue<SeamFrame>();
    this.#served.set(key, frames);
    const reply = (f: SeamFrame) => {
      if (this.#served.get(key) === frames) {
        this.#send(encodeEnvelope({ to: from, channel, kind: Kind.DATA }, encodeFrame(f)));
      }
    };
    void this.#serve(frames, reply, "relay").finally(() => {
      if (this.#served.get(key) !== frames) return;
      this.#served.delete(key);
      this.#send(encodeEnvelope({ to: from, channel, kind: Kind.CLOSE }));
    });
  }

  #lost(why: string): void {
    if (this.#closed) return;
    this.#closed = why;
    this.#failStreams(why);
  }

  #failStreams(why: string): void {
    for (const q of this.#served.values()) q.fail(new SeamError("unavailable", why));
    for (const d of this.#dialed.values()) d.replies.fail(new SeamError("unavailable", why));
    for (const a of [...this.#asked.values()]) a.reject(new SeamError("unavailable", why));
    this.#served.clear();
    this.#dialed.clear();
  }
}
