import { describe, expect, it } from "vitest";
import { BUSY, ClientLeft, NOT_YET, QueueRefused, RequestQueue } from "../../src/gateway/request-queue.ts";
import { FairQueue } from "../../src/gateway/fair-queue.ts";
import { WaitTimes } from "../../src/gateway/wait-times.ts";

/** `slots` routes; an attempt takes one or answers busy; `free()` gives one back. */
function capacity(slots: number) {
  let free = slots;
  const order: string[] = [];
  return {
    order,
    attempt: (name: string) => () => {
      if (free === 0) return Promise.resolve(BUSY);
      free--;
      order.push(name);
      return Promise.resolve(name);
    },
    free: () => free++,
  };
}

const never = () => new AbortController().signal;
const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));
/** Long enough that only wakes (not polls or deadlines) move the queue. */
const QUIET = { maxWaiting: 64, timeoutMs: 60_000, pollMs: 60_000 };

describe("fair queue", () => {
  it("takes turns round-robin between keys, first in first out within a key", () => {
    const q = new FairQueue<string>(10);
    for (const x of ["a1", "a2", "a3", "b1", "b2", "c1"]) q.push(x[0], x);
    const order: string[] = [];
    for (let h = q.peek(); h; h = q.peek()) {
      order.push(h.item);
      q.served(h.key, h.item);
    }
    expect(order).toEqual(["a1", "b1", "c1", "a2", "b2", "a3"]);
    expect(q.size).toBe(0);
  });

  it("is bounded; a removal keeps the key's turn, a new key waits for every other", () => {
    const q = new FairQueue<string>(3);
    expect([q.push("a", "a1"), q.push("a", "a2"), q.push("b", "b1"), q.push("c", "c1")]).toEqual([
      true,
      true,
      true,
      false,
    ]);
    expect(q.remove("a", "a1")).toBe(true);
    expect(q.peek()).toEqual({ key: "a", item: "a2" });
    expect(q.remove("a", "nope")).toBe(false);
    q.push("c", "c1");
    q.served("a", "a2");
    expect(q.peek()?.item).toBe("b1");
    q.served("b", "b1");
    expect(q.peek()?.item).toBe("c1");
  });
});

describe("wait times", () => {
  it("gives nearest-rank quantiles of the recent window and totals of all", () => {
    const w = new WaitTimes(4);
    expect(w.summary()).toEqual({ p50Ms: 0, p95Ms: 0, sumMs: 0, count: 0 });
    for (const ms of [100, 1, 2, 3, 4]) w.add(ms);
    // the window holds 1..4: 100 fell out of it, not out of the sum
    expect(w.summary()).toEqual({ p50Ms: 2, p95Ms: 4, sumMs: 110, count: 5 });
  });
});

describe("request queue", () => {
  it("admits at once while a route is free, queues when busy, serves keys round-robin", async () => {
    const cap = capacity(1);
    const a = new RequestQueue<string>(QUIET);
    expect(await a.admit("x", cap.attempt("first"), never())).toBe("first");
    const done: string[] = [];
    const wait = (key: string, name: string) =>
      a.admit(key, cap.attempt(name), never()).then((r) => done.push(r));
    const all = [wait("a", "a1"), wait("a", "a2"), wait("a", "a3"), wait("b", "b1"), wait("c", "c1")];
    await tick();
    expect(a.stats().waiting).toBe(5);
    // one slot frees at a time: turns go a, b, c, a, a
    for (let i = 0; i < 5; i++) {
      cap.free();
      a.wake();
      await tick();
    }
    await Promise.all(all);
    expect(done).toEqual(["a1", "b1", "c1", "a2", "a3"]);
    const s = a.stats();
    expect([s.waiting, s.queued, s.wait.count]).toEqual([0, 5, 5]);
  });

  it("a newcomer never overtakes a waiter", async () => {
    const cap = capacity(0);
    const a = new RequestQueue<string>(QUIET);
    const first = a.admit("k", cap.attempt("first"), never());
    await tick();
    cap.free();
    // capacity is free, but "first" waits: "late" queues behind it
    const late = a.admit("k", cap.attempt("late"), never());
    a.wake();
    expect(await first).toBe("first");
    cap.free();
    a.wake();
    expect(await late).toBe("late");
  });

  it("refuses past the bound at once, with a Retry-After", async () => {
    const cap = capacity(0);
    const a = new RequestQueue<string>({ ...QUIET, maxWaiting: 2 });
    const waiting = [a.admit("a", cap.attempt("1"), never()), a.admit("b", cap.attempt("2"), never())];
    const over = await a.admit("c", cap.attempt("3"), never()).catch((e) => e);
    expect(over).toBeInstanceOf(QueueRefused);
    expect(over.reason).toBe("queue_full");
    expect(over.retryAfterS).toBeGreaterThanOrEqual(1);
    expect(a.stats().refused).toEqual({ queue_full: 1, timeout: 0 });
    cap.free();
    cap.free();
    a.wake();
    expect(await Promise.all(waiting)).toEqual(["1", "2"]);
  });

  it("refuses a waiter at its deadline; a poll admits without any wake", async () => {
    const cap = capacity(0);
    const a = new RequestQueue<string>({ maxWaiting: 8, timeoutMs: 80, pollMs: 10 });
    const t0 = performance.now();
    const late = await a.admit("a", cap.attempt("late"), never()).catch((e) => e);
    expect(late).toBeInstanceOf(QueueRefused);
    expect(late.reason).toBe("timeout");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(70);
    // another gateway frees a route: only the poll can notice
    const polled = a.admit("a", cap.attempt("polled"), never());
    setTimeout(() => cap.free(), 20);
    expect(await polled).toBe("polled");
    expect(a.stats()).toMatchObject({ waiting: 0, queued: 2, refused: { queue_full: 0, timeout: 1 } });
  });

  it("a client that leaves leaves the queue; attempt errors reach the caller", async () => {
    const cap = capacity(0);
    const a = new RequestQueue<string>(QUIET);
    const gone = new AbortController();
    const leaving = a.admit("a", cap.attempt("leaving"), gone.signal).catch((e) => e);
    const staying = a.admit("a", cap.attempt("staying"), never());
    await tick();
    gone.abort();
    expect(await leaving).toBeInstanceOf(ClientLeft);
    expect(a.stats()).toMatchObject({ waiting: 1, left: 1 });
    cap.free();
    a.wake();
    expect(await staying).toBe("staying");
    // no route at all is not busy: the error ends the request, queued or not
    const broken = () => Promise.reject(new Error("no route"));
    await expect(a.admit("a", broken, never())).rejects.toThrow("no route");
    const blocker = a.admit("a", cap.attempt("blocker"), never());
    await tick();
    const queuedBroken = a.admit("b", broken, never());
    cap.free();
    a.wake();
    expect(await blocker).toBe("blocker");
    await expect(queuedBroken).rejects.toThrow("no route");
    expect(a.stats().waiting).toBe(0);
  });

  it("a waiter no route suits yet is passed over: the requests behind it are served, it keeps its turn", async () => {
    const cap = capacity(0);
    const a = new RequestQueue<string>(QUIET);
    // a repair that avoids the nodes it lost, until its range comes back
    let back = false;
    const repair = () => back ? cap.attempt("repair")() : Promise.resolve(NOT_YET);
    const repaired = a.admit("repairs", repair, never());
    const first = a.admit("client", cap.attempt("first"), never());
    const second = a.admit("client", cap.attempt("second"), never());
    await tick();
    expect(a.stats().waiting).toBe(3);
    // room for two: both new requests, behind the repair in line, take it
    cap.free();
    cap.free();
    a.wake();
    expect([await first, await second]).toEqual(["first", "second"]);
    expect(a.stats().waiting).toBe(1);
    // its range is back and a route frees: the repair gets it
    back = true;
    cap.free();
    a.wake();
    expect(await repaired).toBe("repair");
    expect(cap.order).toEqual(["first", "second", "repair"]);
  });

  it("a deadline during an attempt lets the attempt decide", async () => {
    let release!: (v: string | typeof BUSY) => void;
    let calls = 0;
    const slow = () => {
      calls++;
      return calls === 1 ? Promise.resolve(BUSY) : new Promise<string | typeof BUSY>((r) => (release = r));
    };
    const a = new RequestQueue<string>({ maxWaiting: 4, timeoutMs: 30, pollMs: 60_000 });
    const p = a.admit("a", slow, never());
    await tick();
    a.wake(); // the second attempt hangs past the deadline
    await tick(60);
    release("late but served");
    expect(await p).toBe("late but served");
  });
});
