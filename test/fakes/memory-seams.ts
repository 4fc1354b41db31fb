// Seam links in memory, standing in for the gRPC client and server of node-apis/seam/grpc.ts.
// Each frame crosses as protobuf bytes (encoded and decoded again), so neither side ever
// shares a message object with the other, just as over HTTP/2. What each side sees on
// close, abort and failure follows the gRPC link:
//   - send() queues the frame; false once this side has closed or aborted;
//   - close() ends the server's frames after the queued ones; the replies end when serve returns;
//   - abort() resets the stream: the server's frames throw, and so do this side's replies;
//   - a frame past the size limit fails the stream on both sides (resource_exhausted);
//   - a URL nobody serves fails the replies (connection refused), like an unreachable node.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { type SeamFrame, SeamFrameSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { AsyncQueue } from "../../src/seam/async-queue.ts";
import type { SeamDialer, SeamLink, SeamServe } from "../../src/seam/link.ts";
import { MAX_FRAME_BYTES } from "../../src/seam/limits.ts";

/** A gRPC-like stream failure as the other side sees it. */
export class StreamError extends Error {
  override name = "StreamError";
  constructor(readonly code: "canceled" | "resource_exhausted" | "unavailable", message: string) {
    super(`[${code}] ${message}`);
  }
}

const clone = (f: SeamFrame) => fromBinary(SeamFrameSchema, toBinary(SeamFrameSchema, f));

/** One stream, as its client holds it; `sent` and `received` let a test see the traffic. */
export class MemoryLink implements SeamLink {
  readonly transport = "memory";
  readonly sent: SeamFrame[] = [];
  readonly received: SeamFrame[] = [];
  readonly replies = new AsyncQueue<SeamFrame>();
  /** the frames the server side reads */
  readonly frames = new AsyncQueue<SeamFrame>();
  closed = false;
  aborted?: string;
  /** resolves when the server's serve() returned (or at once when nobody serves the URL) */
  readonly done: Promise<void>;
  #settle!: () => void;

  constructor(readonly url: string, readonly maxFrameBytes: number) {
    this.done = new Promise((r) => (this.#settle = r));
  }

  send(frame: SeamFrame): boolean {
    if (this.closed || this.aborted !== undefined || this.frames.ended) return false;
    const bytes = toBinary(SeamFrameSchema, frame);
    this.sent.push(frame);
    if (bytes.length > this.maxFrameBytes) {
      // the server refuses the message; the client learns it from the stream's end
      const e = new StreamError("resource_exhausted", `message of ${bytes.length} bytes`);
      this.frames.fail(e);
      this.replies.fail(e);
      return true;
    }
    return this.frames.push(fromBinary(SeamFrameSchema, bytes));
  }

  close(): void {
    this.closed = true;
    this.frames.end();
  }

  abort(reason: string): void {
    if (this.aborted !== undefined) return;
    this.aborted = reason;
    this.frames.fail(new StreamError("canceled", `stream reset: ${reason}`));
    this.replies.fail(new StreamError("canceled", reason));
  }

  /** The server's side goes away without a word (a crashed or killed node). */
  vanish(why = "connection reset"): void {
    const e = new StreamError("unavailable", why);
    this.frames.fail(e);
    this.replies.fail(e);
  }

  /** Wires the server: what it replies comes back as fresh messages, in order. */
  attach(serve: SeamServe | undefined): void {
    if (!serve) {
      this.replies.fail(new StreamError("unavailable", `connect ECONNREFUSED ${this.url}`));
      this.#settle();
      return;
    }
    const reply = (f: SeamFrame) => {
      const copy = clone(f);
      if (this.replies.push(copy)) this.received.push(copy);
    };
    serve(this.frames, reply, "memory").then(
      () => this.replies.end(),
      (e) => this.replies.fail(e),
    ).finally(() => this.#settle());
  }
}

/** Servers by URL, and a dialer that reaches them. */
export class MemorySeams {
  readonly #servers = new Map<string, SeamServe>();
  readonly links: MemoryLink[] = [];
  /** the transport's message limit (64 MiB, as the gRPC server sets it) */
  maxFrameBytes = MAX_FRAME_BYTES;
  /** URLs whose dial throws at once (a malformed address, a relay this node cannot reach) */
  readonly refuseDial = new Set<string>();

  listen(url: string, serve: SeamServe): void {
    this.#servers.set(url, serve);
  }

  readonly dial: SeamDialer = (url) => this.link(url);

  /** dial(), typed as the in-memory link it returns. */
  link(url: string): MemoryLink {
    if (this.refuseDial.has(url)) throw new Error(`cannot dial ${url}`);
    const l = new MemoryLink(url, this.maxFrameBytes);
    this.links.push(l);
    l.attach(this.#servers.get(url));
    return l;
  }

  /** The links dialed to `url`, oldest first. */
  to(url: string): MemoryLink[] {
    return this.links.filter((l) => l.url === url);
  }
}
