// The gateway's request queue (not the tracker's capability admission): a request whose
// attempt finds every route busy waits its turn (`FairQueue`: FIFO per key, round-robin between
// keys) instead of failing. The head tries again whenever capacity may have freed — a session
// of this gateway ended (`wake`), or a short poll passed (other gateways share the routes).
// Every waiter ends with what its attempt returned, an error, or a refusal: past the bound at
// once, past its deadline, or its client gone. Runtime-agnostic: the attempt is any async
// function.
import { FairQueue } from "./fair-queue.ts";
import { type WaitSummary, WaitTimes } from "./wait-times.ts";

/** What an attempt returns when every route is at its limit (as opposed to failing). */
export const BUSY: unique symbol = Symbol("busy");
/**
 * What an attempt returns when no route suits this request now, for reasons of its own (a
 * repair that avoids the nodes it lost): it keeps its place, and the requests after it try.
 */
export const NOT_YET: unique symbol = Symbol("not yet");
export type Attempt<R> = () => Promise<R | typeof BUSY | typeof NOT_YET>;

export interface RequestQueueOptions {
  /** most requests waiting at once; one more is refused at once */
  readonly maxWaiting: number;
  /** longest a request waits for its turn */
  readonly timeoutMs: number;
  /** the head tries again this often even without a release here */
  readonly pollMs: number;
}

export const DEFAULT_REQUEST_QUEUE: RequestQueueOptions = { maxWaiting: 64, timeoutMs: 30_000, pollMs: 250 };

export type RefusalReason = "queue_full" | "timeout";

/** The request was not admitted: the client should try again after `retryAfterS`. */
export class QueueRefused extends Error {
  constructor(readonly reason: RefusalReason, readonly retryAfterS: number, message: string) {
    super(message);
  }
}

/** The client left while its request waited. */
export class ClientLeft extends Error {
  constructor() {
    super("the client went away while its request waited");
  }
}

export interface QueueStats {
  /** waiting now */
  readonly waiting: number;
  /** requests that ever waited */
  readonly queued: number;
  readonly refused: Readonly<Record<RefusalReason, number>>;
  /** waiters whose client left */
  readonly left: number;
  /** of the waiters that got their turn */
  readonly wait: WaitSummary;
}

interface Waiter<R> {
  readonly key: string;
  readonly attempt: Attempt<R>;
  readonly since: number;
  readonly resolve: (r: R) => void;
  readonly reject: (e: unknown) => void;
  readonly cleanup: () => void;
  /** its attempt is in flight: a deadline or a departure waits for the answer */
  attempting: boolean;
  ending?: "timeout" | "left";
}

export class RequestQueue<R> {
  readonly #queue: FairQueue<Waiter<R>>;
  readonly #waits = new WaitTimes();
  readonly #counts = { queued: 0, left: 0, refused: { queue_full: 0, timeout: 0 } };
  #pumping = false;
  /** a wake came while the pump was busy: it goes round again */
  #again = false;
  /** counts wakes, so an attempt made outside the queue learns one came while it ran */
  #wakes = 0;
  #poll: ReturnType<typeof setInterval> | undefined;

  constructor(readonly options: RequestQueueOptions, readonly now: () => number = () => performance.now()) {
    this.#queue = new FairQueue(options.maxWaiting);
  }

  /**
   * The attempt's result, at once when nobody waits and it is not busy, else when this
   * request's turn comes and its attempt is not busy. Rejects with the attempt's error,
   * `QueueRefused` or `ClientLeft`. A result that arrives after the client left is still
   * returned: the caller releases it.
   */
  async admit(key: string, attempt: Attempt<R>, signal: AbortSignal): Promise<R> {
    if (signal.aborted) throw new ClientLeft();
    let woken = false;
    // nobody waits: no turn to respect
    if (this.#queue.size === 0) {
      const wakes = this.#wakes;
      const r = await attempt();
      if (r !== BUSY && r !== NOT_YET) return r;
      if (signal.aborted) throw new ClientLeft();
      woken = this.#wakes !== wakes;
    }
    return await this.#wait(key, attempt, signal, woken);
  }

  /** Capacity may have freed (a session here ended): the head tries again now. */
  wake(): void {
    this.#wakes++;
    void this.#pump();
  }

  stats(): QueueStats {
    return {
      waiting: this.#queue.size,
      queued: this.#counts.queued,
      refused: { ...this.#counts.refused },
      left: this.#counts.left,
      wait: this.#waits.summary(),
    };
  }

  /** Refuses every waiter (shutdown). */
  close(): void {
    for (const w of this.#queue.items()) this.#refuse(w, "timeout", "the gateway is shutting down");
    this.#pollWhileWaiting();
  }

  /** Seconds a refused client should wait: what requests lately waited, 1 s to the deadline. */
  retryAfterS(): number {
    const s = Math.ceil(this.#waits.quantile(0.5) / 1000);
    return Math.min(Math.max(1, s), Math.max(1, Math.ceil(this.options.timeoutMs / 1000)));
  }

  #wait(key: string, attempt: Attempt<R>, signal: AbortSignal, woken: boolean): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const deadline = setTimeout(() => this.#end(w, "timeout"), this.options.timeoutMs);
      const onAbort = () => this.#end(w, "left");
      const w: Waiter<R> = {
        key,
        attempt,
        since: this.now(),
        resolve,
        reject,
        attempting: false,
        cleanup: () => {
          clearTimeout(deadline);
          signal.removeEventListener("abort", onAbort);
        },
      };
      if (!this.#queue.push(key, w)) {
        w.cleanup();
        this.#counts.refused.queue_full++;
        reject(
          new QueueRefused(
            "queue_full",
            this.retryAfterS(),
            `every route is busy and ${this.options.maxWaiting} requests already wait; try again later`,
          ),
        );
        return;
      }
      this.#counts.queued++;
      signal.addEventListener("abort", onAbort, { once: true });
      this.#pollWhileWaiting();
      // capacity freed while this request made its own attempt: its turn may be now
      if (woken) this.wake();
    });
  }

  /** A deadline or a departure: now, or when the attempt in flight answers busy. */
  #end(w: Waiter<R>, why: "timeout" | "left"): void {
    if (w.attempting) {
      w.ending ??= why;
      return;
    }
    if (why === "left") this.#leave(w);
    else {this.#refuse(
        w,
        "timeout",
        `every route stayed busy for ${this.options.timeoutMs} ms; try again later`,
      );}
  }

  #leave(w: Waiter<R>): void {
    if (!this.#queue.remove(w.key, w)) return;
    w.cleanup();
    this.#counts.left++;
    w.reject(new ClientLeft());
    this.#pollWhileWaiting();
  }

  #refuse(w: Waiter<R>, reason: RefusalReason, message: string): void {
    if (!this.#queue.remove(w.key, w)) return;
    w.cleanup();
    this.#counts.refused[reason]++;
    w.reject(new QueueRefused(reason, this.retryAfterS(), message));
    this.#pollWhileWaiting();
  }

  /**
   * Gives waiters their turns in order while their attempts succeed; stops at the first busy
   * answer. A waiter no route suits yet is passed over this round: a repair waiting for a
   * range to come back must not hold every request behind it until its deadline.
   */
  async #pump(): Promise<void> {
    if (this.#pumping) {
      this.#again = true;
      return;
    }
    this.#pumping = true;
    try {
      for (;;) {
        this.#again = false;
        const passed = new Set<Waiter<R>>();
        for (let next = this.#nextWaiter(passed); next; next = this.#nextWaiter(passed)) {
          const w = next;
          w.attempting = true;
          let out: { ok: R } | { busy: true } | { notYet: true } | { error: unknown };
          try {
            const r = await w.attempt();
            out = r === BUSY ? { busy: true } : r === NOT_YET ? { notYet: true } : { ok: r };
          } catch (error) {
            out = { error };
          }
          w.attempting = false;
          if ("ok" in out || "error" in out) {
            this.#queue.served(w.key, w);
            w.cleanup();
            if ("error" in out) w.reject(out.error);
            else {
              this.#waits.add(this.now() - w.since);
              w.resolve(out.ok);
            }
            continue; // the next one may fit too
          }
          passed.add(w);
          if (w.ending) this.#end(w, w.ending);
          if ("busy" in out) break;
        }
        // still busy, or nobody suited: wait for the next wake or poll, unless one came meanwhile
        if (!this.#again) break;
      }
    } finally {
      this.#pumping = false;
      this.#pollWhileWaiting();
    }
  }

  /** The first waiter in turn order not passed over this round. */
  #nextWaiter(passed: ReadonlySet<Waiter<R>>): Waiter<R> | undefined {
    for (const { item } of this.#queue.inTurn()) if (!passed.has(item)) return item;
    return undefined;
  }

  /** A poll runs exactly while someone waits. */
  #pollWhileWaiting(): void {
    if (this.#queue.size > 0 && !this.#poll) {
      this.#poll = setInterval(() => this.wake(), this.options.pollMs);
    } else if (this.#queue.size === 0 && this.#poll) {
      clearInterval(this.#poll);
      this.#poll = undefined;
    }
  }
}
