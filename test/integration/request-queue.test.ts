import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

interface Asked {
  stream: boolean;
  status: number;
  done: boolean;
  error?: string;
  message?: string;
  retryAfter?: string | null;
  ms: number;
}

/** The value of a /metrics line (first match). */
const metric = (lines: string[], name: string) => {
  const l = lines.find((x) => x.startsWith(`${name} `));
  return l === undefined ? undefined : Number(l.split(" ").pop());
};

describe("the request queue (strata up, one route, 2 sessions a node)", () => {
  it("queues a burst, refuses past the bound with 429, frees what clients leave, counts it all", async () => {
    const r = await denoRun(`${root}test/integration/request-queue.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    const slots = out.slots;

    // (a) 8 requests against 2 sessions a node: all complete, the tracker never over-books
    const queued = out.queued;
    expect(queued.results, "the burst hung").not.toBe("hung");
    for (const a of queued.results as Asked[]) {
      expect([a.status, a.done, a.error], JSON.stringify(a)).toEqual([200, true, undefined]);
    }
    expect(queued.peakLoad).toBeLessThanOrEqual(slots);
    expect(metric(queued.metrics, "strata_queue_requests_total")).toBeGreaterThanOrEqual(1);

    // (b) a queue bound of 4 and 16 at once: the rest get 429 with Retry-After, none hangs
    const b = out.bounded;
    expect(b.before.nodes).toEqual([0, 0]);
    expect(b.results, "the flood hung").not.toBe("hung");
    const results = b.results as Asked[];
    const ok = results.filter((a) => a.status === 200);
    const refused = results.filter((a) => a.status === 429);
    expect(ok.length + refused.length, JSON.stringify(results)).toBe(16);
    for (const a of ok) expect(a.done, JSON.stringify(a)).toBe(true);
    // 2 running and 4 waiting at the least were served
    expect(ok.length).toBeGreaterThanOrEqual(2 + 4);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    for (const a of refused) {
      expect(a.error).toBe("rate_limit_exceeded");
      expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    // refused at once (past the bound), not after the deadline
    expect(Math.max(...refused.map((a) => a.ms))).toBeLessThan(30_000);
    expect(b.peakLoad).toBeLessThanOrEqual(slots);
    // nothing held afterwards: the nodes and the tracker count no session
    expect(b.after.nodes).toEqual([0, 0]);
    for (const t of b.after.tracker) expect([t.sessions, t.load]).toEqual([0, 0]);

    // (c) the queue's counters
    expect(metric(b.metrics, "strata_queue_depth")).toBe(0);
    expect(metric(b.metrics, "strata_queue_requests_total")).toBeGreaterThanOrEqual(4);
    expect(metric(b.metrics, 'strata_queue_refused_total{reason="queue_full"}')).toBe(refused.length);
    expect(metric(b.metrics, 'strata_queue_wait_seconds{quantile="0.95"}')).toBeGreaterThan(0);
    expect(metric(b.metrics, "strata_queue_wait_seconds_count")).toBeGreaterThanOrEqual(4);

    // (d) a queued client that leaves leaves the queue; non-streamed clients that leave
    // mid-generation get their sessions cancelled
    const l = out.leaving;
    expect(l.busy.nodes).toEqual([slots, slots]);
    expect(metric(l.waiting, "strata_queue_depth")).toBe(1);
    expect(l.thirdEnded).toBe("AbortError");
    expect(metric(l.afterThird, "strata_queue_depth")).toBe(0);
    expect(metric(l.afterThird, "strata_queue_left_total")).toBe(1);
    expect(l.longEnded).toEqual(["AbortError", "AbortError"]);
    expect(l.after.nodes).toEqual([0, 0]);
    for (const t of l.after.tracker) expect([t.sessions, t.load]).toEqual([0, 0]);

    // (e) limits per client: the key over its limit gets 429 naming the limit, with
    // Retry-After; the other key beside it is served
    const lim = out.limits;
    expect([lim.first.status, lim.first.done], JSON.stringify(lim.first)).toEqual([200, true]);
    expect([lim.secondAtOnce.status, lim.secondAtOnce.error]).toEqual([429, "rate_limit_exceeded"]);
    expect(lim.secondAtOnce.message).toMatch(/requests at once, at most 1/);
    expect(Number(lim.secondAtOnce.retryAfter)).toBeGreaterThanOrEqual(1);
    expect([lim.other.status, lim.other.done], JSON.stringify(lim.other)).toEqual([200, true]);
    expect(lim.inTurn.map((a: Asked) => a.status)).toEqual([200, 200, 429]);
    expect(lim.inTurn[2].message).toMatch(/requests a minute, at most 3/);
    expect(Number(lim.inTurn[2].retryAfter)).toBeGreaterThanOrEqual(1);
    expect(lim.after.nodes).toEqual([0, 0]);
  });
});
