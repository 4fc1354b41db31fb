import { describe, expect, it } from "vitest";
import { checkCoverage } from "../../src/route/plan.ts";
import { type Candidate, disjointRoutes } from "../../src/tracker/routes/select.ts";
import { chooseRoutes } from "../../src/tracker/routes/route-choice.ts";

const cand = (node: string, start: number, end: number, load = 0, tokensPerS = 100): Candidate => ({
  node,
  url: `http://${node}`,
  range: { start, end },
  load,
  tokensPerS,
  kvCells: 1024,
  sessionCells: 1024,
});

describe("route selection", () => {
  it("covers every layer once, prefers fewer hops and faster nodes, skips full ones", () => {
    // c alone: 1000/60 + 3 ms a token; a then b: 2 × (10 + 3)
    const cs = [cand("a", 0, 10), cand("b", 10, 30), cand("c", 0, 30, 0, 60), cand("d", 0, 10, 1)];
    const routes = disjointRoutes(cs, 30, 5);
    expect(routes.map((r) => r.map((c) => c.node))).toEqual([["c"], ["a", "b"]]);
    // d is full (load 1): never chosen, even with a and b busy
    const busy = disjointRoutes([cand("a", 0, 10, 0.9), cand("b", 10, 30), cand("d", 0, 10, 1)], 30, 2);
    expect(busy.map((r) => r.map((c) => c.node))).toEqual([["a", "b"]]);
    expect(disjointRoutes([cand("a", 0, 10), cand("b", 12, 30)], 30, 1)).toEqual([]);
  });

  it("a repair keeps the nodes that still hold the session, even slower or full ones", () => {
    // b0 is slow and full, but holds the session's KV for 10:30: only the lost 0:10 is replaced
    const cs = [cand("a1", 0, 10), cand("b0", 10, 30, 1, 5), { ...cand("b0", 10, 30, 1, 5), kept: true }];
    expect(disjointRoutes(cs.slice(0, 2), 30, 1)).toEqual([]);
    expect(disjointRoutes([cs[0], cs[2], cand("b1", 10, 30)], 30, 1)[0].map((c) => c.node)).toEqual([
      "a1",
      "b0",
    ]);
    // and it comes first beside a less loaded route: the fast but busy a1 joins the kept b0
    // (the cheapest route), while the slower a2 and b2 are idle
    const kept = [cand("a1", 0, 10, 0.5, 100), cs[2]];
    const idle = [cand("a2", 0, 10, 0, 15), cand("b2", 10, 30, 0, 15)];
    expect(chooseRoutes([...kept, ...idle], 30, 1)[0].map((c) => c.node)).toEqual(["a1", "b0"]);
  });

  it("checks a static route's coverage", () => {
    expect(() =>
      checkCoverage(
        [{ url: "x", range: { start: 0, end: 12 } }, { url: "y", range: { start: 12, end: 30 } }],
        30,
      )
    )
      .not.toThrow();
    expect(() =>
      checkCoverage(
        [{ url: "x", range: { start: 0, end: 12 } }, { url: "y", range: { start: 13, end: 30 } }],
        30,
      )
    )
      .toThrow(/needs layer 12 next/);
    expect(() => checkCoverage([{ url: "x", range: { start: 0, end: 12 } }], 30)).toThrow(
      /stops at layer 12 of 30/,
    );
  });
});
