import { describe, expect, it } from "vitest";
import { SessionLoad } from "../../src/tracker/routes/load.ts";
import { type Candidate, disjointRoutes, noRouteReason } from "../../src/tracker/routes/select.ts";

const options = { claimTtlMs: 15_000, doneQuietMs: 3_000 };
const report = (ids: string[], sessions = ids.length) => ({ sessions, sessionIds: ids });

describe("tracker load accounting", () => {
  it("counts a route from hand-out to done, each session once", () => {
    const l = new SessionLoad(options);
    l.claim("n", "s1", 0);
    l.claim("n", "s2", 0);
    l.claim("m", "s1", 0);
    expect([l.load("n", 1), l.load("m", 1), l.load("other", 1)]).toEqual([2, 1, 0]);
    // the node reports what it holds: claimed and reported sessions count once
    l.report("n", report(["s1", "s2"]), 500);
    expect(l.load("n", 500)).toBe(2);
    // the gateway's word frees it at once, on every node of the route
    expect(l.done("s1", 600)).toBe(2);
    expect([l.load("n", 600), l.load("m", 600)]).toEqual([1, 0]);
    expect(l.done("s1", 600)).toBe(0);
  });

  it("releases a session from the nodes still holding its claim, whatever went before", () => {
    const l = new SessionLoad(options);
    for (const n of ["a", "b", "c"]) l.claim(n, "s1", 0);
    l.claim("a", "s2", 0);
    // c forgotten (it registered again), b saw the session open and then closed
    l.forget("c");
    l.report("b", report(["s1"]), 100);
    l.report("b", report([]), 200);
    expect(l.done("s1", 300)).toBe(1);
    expect([l.load("a", 300), l.load("b", 300), l.load("c", 300)]).toEqual([1, 0, 0]);
    // a new claim after done counts again, and goes with the next done
    l.claim("c", "s1", 400);
    expect(l.load("c", 400)).toBe(1);
    expect(l.done("s1", 500)).toBe(1);
    expect(l.done("s2", 500)).toBe(1);
  });

  it("ignores a done session in a stale heartbeat for a while, then believes the node", () => {
    const l = new SessionLoad(options);
    l.claim("n", "s1", 0);
    l.done("s1", 100);
    // sampled before the node freed it, arriving after the gateway's word
    l.report("n", report(["s1"]), 200);
    expect(l.load("n", 200)).toBe(0);
    // still reported long after: the node really holds it
    l.report("n", report(["s1"]), 3_200);
    expect(l.load("n", 3_200)).toBe(1);
  });

  it("drops a claim its node never reports after the timeout, and one the node stopped reporting", () => {
    const l = new SessionLoad(options);
    l.claim("n", "crashed-gateway", 0);
    l.report("n", report([]), 1_000);
    expect(l.load("n", 14_000)).toBe(1);
    expect(l.load("n", 15_001)).toBe(0);
    // reported once, then gone from the node: closed, with no word from the gateway
    l.claim("n", "s2", 20_000);
    l.report("n", report(["s2"]), 21_000);
    expect(l.load("n", 21_000)).toBe(1);
    l.report("n", report([]), 22_000);
    expect(l.load("n", 22_000)).toBe(0);
    // a reported session nobody claimed (a probe, another tracker's route) counts too
    l.report("n", report(["probe"]), 23_000);
    expect(l.load("n", 23_000)).toBe(1);
  });

  it("falls back on the count from a node that lists no ids, without counting twice", () => {
    const l = new SessionLoad(options);
    l.claim("old", "s1", 0);
    l.report("old", report([], 1), 100);
    expect(l.load("old", 100)).toBe(1);
    l.report("old", report([], 3), 200);
    expect(l.load("old", 200)).toBe(3);
    l.forget("old");
    expect(l.load("old", 200)).toBe(0);
  });
});

describe("no route: busy or absent", () => {
  const cand = (node: string, start: number, end: number, load: number): Candidate => ({
    node,
    url: `http://${node}`,
    range: { start, end },
    load,
    tokensPerS: 100,
    kvCells: 1024,
    sessionCells: 1024,
  });

  it("says busy when a complete route exists but a node of every one is full", () => {
    const full = [cand("a", 0, 12, 1), cand("b", 12, 30, 0.5)];
    expect(disjointRoutes(full, 30, 1)).toEqual([]);
    expect(noRouteReason(full, 30)).toBe("busy");
    // a gap in the layers is no route at all, however idle
    expect(noRouteReason([cand("a", 0, 12, 0), cand("b", 14, 30, 0)], 30)).toBe("none");
    expect(noRouteReason([], 30)).toBe("none");
  });
});
