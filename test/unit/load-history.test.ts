import { describe, expect, it } from "vitest";
import { LoadHistory } from "../../src/gateway/load-history.ts";

describe("the gateway's load history", () => {
  it("counts tokens a second, TTFT percentiles over a window, the deepest queue, each node's busy share", () => {
    const h = new LoadHistory(10, 3);
    const t0 = 1_000_000_000;
    const node = (n: string, computeMs: number, batchSessions = 1) => ({
      node: n,
      computeMs,
      sampleMs: 0,
      batchSessions,
    });
    for (let i = 0; i < 5; i++) h.step(t0 + 100 * i, [node("a", 100), node("b", 200, 2)]);
    h.firstToken(t0, 50);
    h.firstToken(t0 + 1000, 150);
    h.firstToken(t0 + 1500, 250);
    h.queue(t0 + 1000, 3);
    h.queue(t0 + 1200, 1);
    const s = h.series(t0 + 2000);
    expect(s.t).toHaveLength(10);
    const at = (k: number) => s.t.length - 3 + k; // the seconds of t0, t0 + 1 s, t0 + 2 s
    expect(s.tokensPerS.slice(at(0))).toEqual([5, 0, 0]);
    // a's 5 × 100 ms is half its second; b's calls were shared by two sessions each
    expect(s.busy.a[at(0)]).toBeCloseTo(0.5);
    expect(s.busy.b[at(0)]).toBeCloseTo(0.5);
    expect(s.queueDepth.slice(at(0))).toEqual([0, 3, 0]);
    expect(s.ttftP50Ms.slice(at(0))).toEqual([50, 150, 150]);
    expect(s.ttftP95Ms.slice(at(0))).toEqual([50, 250, 250]);
    expect(s.ttftP50Ms[0]).toBeNull();
    // seconds past the window are dropped
    expect(h.series(t0 + 60_000).tokensPerS.every((x) => x === 0)).toBe(true);
  });
});
