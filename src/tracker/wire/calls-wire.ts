// Tracker calls on a connection of their own: each call and its answer is one message in the
// fast seam's framing (9-byte header: length, channel, kind), the channel numbering the call.
// Over Connect on HTTP/2 a call cost the tracker and its caller about 280 µs of CPU together
// on this machine, of which 64 µs was Connect's own work (docs/network.md); at thousands of
// heartbeats and routes a second that was most of two cores. The tracker's port tells these
// connections apart by their first bytes; Connect and gRPC stay on it for everyone else.
// Runtime-agnostic: a host hands in its socket as a ByteDuplex.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  type TrackerAnswer,
  TrackerAnswerSchema,
  type TrackerCall,
  TrackerCallSchema,
} from "../../gen/strata/tracker/v1/tracker_pb.ts";
import { MAX_FRAME_BYTES } from "../../seam/limits.ts";
import { type ByteDuplex, MessageReader, sendMessage, speakFirst } from "../../seam/mux.ts";

const ascii = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));
/** What a caller sends first. As long as HTTP/2's connection preface (24 bytes), so a tracker
 *  that serves Connect alone reads all of it, finds no HTTP/2 and hangs up at once. */
export const CALLS_PREFACE = ascii("STRATA-TRACKER/1 direct\n");
/** The tracker's answer: it takes calls this way. */
export const CALLS_ACCEPT = ascii("STRATA-TRACKER/1 ok\n");

const CALL = 1;
const ANSWER = 2;

/** What one connection may have the tracker work on at once; past it a call is refused. */
export const CALLS_LIMITS = { inFlight: 4096 } as const;

/** A call that got no answer: its connection ended, its deadline passed, or its caller gave up. */
export class CallsError extends Error {
  constructor(readonly code: "unavailable" | "deadline_exceeded" | "canceled", message: string) {
    super(message);
  }
}

interface Pending {
  resolve(a: TrackerAnswer): void;
  reject(e: CallsError): void;
}

/** The caller's end: calls numbered on one connection, answers matched to them as they come. */
export class CallsClient {
  #next = 0;
  readonly #pending = new Map<number, Pending>();
  #closed?: string;
  readonly #reader = new MessageReader(
    (channel, kind, body) => {
      const p = this.#pending.get(channel);
      if (kind !== ANSWER || !p) return;
      this.#pending.delete(channel);
      try {
        p.resolve(fromBinary(TrackerAnswerSchema, body));
      } catch {
        p.resolve(create(TrackerAnswerSchema, { errorCode: "internal", errorMessage: "undecodable answer" }));
      }
    },
    (channel) => this.#fail(channel, new CallsError("unavailable", "an answer past the frame limit")),
  );

  private constructor(private readonly duplex: ByteDuplex) {}

  /** Speaks first and waits for the tracker to accept. Rejects when it answers anything else
   *  (a tracker without this path), hangs up, or says nothing within `timeoutMs`. */
  static connect(duplex: ByteDuplex, timeoutMs = 5_000): Promise<CallsClient> {
    const c = new CallsClient(duplex);
    return speakFirst(duplex, CALLS_PREFACE, CALLS_ACCEPT, {
      timeoutMs,
      refused: (why) => new CallsError("unavailable", `tracker calls were not accepted: ${why}`),
      take: (chunk) => c.#reader.push(chunk),
      lost: (why) => c.#lost(why),
    }).then(() => c);
  }

  get closed(): boolean {
    return this.#closed !== undefined;
  }

  /** One call: `method` is the Connect path, `request` the message's bytes. */
  call(
    method: string,
    request: Uint8Array,
    timeoutMs?: number,
    signal?: AbortSignal,
  ): Promise<TrackerAnswer> {
    if (this.#closed) return Promise.reject(new CallsError("unavailable", this.#closed));
    if (signal?.aborted) return Promise.reject(new CallsError("canceled", "the call was cancelled"));
    const channel = (this.#next = (this.#next % 0xffff_fffe) + 1);
    return new Promise<TrackerAnswer>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => this.#fail(channel, new CallsError("canceled", "the call was cancelled"));
      const timer = timeoutMs
        ? setTimeout(() => this.#fail(channel, deadline(timeoutMs)), timeoutMs)
        : undefined;
      signal?.addEventListener("abort", onAbort);
      this.#pending.set(channel, {
        resolve: (a) => (done(), resolve(a)),
        reject: (e) => (done(), reject(e)),
      });
      const call = create(TrackerCallSchema, { method, request, timeoutMs: timeoutMs ?? 0 });
      sendMessage(this.duplex, channel, CALL, toBinary(TrackerCallSchema, call));
    });
  }

  close(): void {
    this.duplex.close();
  }

  #fail(channel: number, e: CallsError): void {
    const p = this.#pending.get(channel);
    if (!p) return;
    this.#pending.delete(channel);
    p.reject(e);
  }

  #lost(why: string): void {
    this.#closed ??= `the tracker connection ended: ${why}`;
    for (const channel of [...this.#pending.keys()]) {
      this.#fail(channel, new CallsError("unavailable", this.#closed));
    }
  }
}

const deadline = (ms: number) => new CallsError("deadline_exceeded", `no answer within ${ms} ms`);

/** Answers one call; the signal aborts when the caller's connection ends. */
export type AnswerCall = (call: TrackerCall, signal: AbortSignal) => Promise<TrackerAnswer>;

/** An answer that is a Connect error (its code as Connect spells it: "unavailable", …). */
export const refusal = (code: string, message: string): TrackerAnswer =>
  create(TrackerAnswerSchema, { errorCode: code, errorMessage: message });

/**
 * The tracker's end of one connection (its preface read already; `head` is what came after
 * it): each call is answered by `answer`, at most CALLS_LIMITS.inFlight at once.
 */
export function serveCalls(duplex: ByteDuplex, head: Uint8Array, answer: AnswerCall): void {
  const working = new Set<AbortController>();
  let closed = false;
  const reply = (channel: number, a: TrackerAnswer) => {
    if (!closed) sendMessage(duplex, channel, ANSWER, toBinary(TrackerAnswerSchema, a));
  };
  const reader = new MessageReader(
    (channel, kind, body) => {
      if (kind !== CALL) return;
      let call: TrackerCall;
      try {
        call = fromBinary(TrackerCallSchema, body);
      } catch {
        return reply(channel, refusal("invalid_argument", "not a tracker call"));
      }
      if (working.size >= CALLS_LIMITS.inFlight) {
        return reply(
          channel,
          refusal("resource_exhausted", `${CALLS_LIMITS.inFlight} calls under way on this connection`),
        );
      }
      const ac = new AbortController();
      working.add(ac);
      answer(call, ac.signal)
        .catch((e) => refusal("internal", e instanceof Error ? e.message : String(e)))
        .then((a) => {
          working.delete(ac);
          reply(channel, a);
        });
    },
    (channel, bytes) =>
      reply(channel, refusal("resource_exhausted", `a call of ${bytes} bytes exceeds ${MAX_FRAME_BYTES}`)),
  );
  duplex.onClose(() => {
    closed = true;
    for (const ac of working) ac.abort();
    working.clear();
  });
  duplex.onData((chunk) => reader.push(chunk));
  duplex.write([CALLS_ACCEPT]);
  if (head.length > 0) reader.push(head);
}
