import { describe, expect, it } from "vitest";
import {
  bottleneck,
  gaps,
  type Participant,
  plan,
  type Span,
} from "../../src/tracker/placement/placement.ts";

// 24 layers of 10 MB; the first range also holds 40 MB of embeddings, the last 40 MB of head
const LAYER = 10;
const need = (s: Span) => (s.end - s.start) * LAYER + (s.start === 0 ? 40 : 0) + (s.end === 24 ? 40 : 0);
// a step reads every layer of a range, and the head if it is the last (the embeddings: one row)
const work = (s: Span) => (s.end - s.start) * LAYER + (s.end === 24 ? 40 : 0);
const model = (caps: Record<string, number>) => ({
  nLayer: 24,
  fits: (node: string, s: Span) => need(s) <= caps[node],
  work,
});
const p = (node: string, speed = 0, current?: Span): Participant => ({ node, speed, current });
const spans = (pl: ReadonlyMap<string, Span | undefined>) =>
  Object.fromEntries([...pl].map(([n, s]) => [n, s ? `${s.start}:${s.end}` : "-"]));

describe("placement", () => {
  it("covers every layer with as few hops as the caps allow", () => {
    // 24 × 10 + 80 = 320 MB in all; caps of 130 MB need three nodes
    const m = model({ a: 130, b: 130, c: 130, d: 130 });
    const pl = plan(m, [p("a"), p("b"), p("c")]);
    expect(gaps(24, [...pl.values()].filter((s): s is Span => !!s))).toEqual([]);
    for (const [n, s] of pl) expect(m.fits(n, s!)).toBe(true);
    // one big node alone takes it all: one hop
    expect(spans(plan(model({ big: 400, a: 130 }), [p("a"), p("big")]))).toMatchObject({ big: "0:24" });
  });

  it("a node twice as fast gets about twice the work, within its cap", () => {
    const m = model({ fast: 400, slow: 400 });
    // both fit the whole model alone: one route of one hop, the faster one
    expect(spans(plan(m, [p("slow", 100), p("fast", 200)]))).toMatchObject({ fast: "0:24" });
    // neither does alone: the split follows speed
    const m2 = model({ fast: 250, slow: 250 });
    const pl = plan(m2, [p("slow", 100), p("fast", 200)]);
    const fast = pl.get("fast")!, slow = pl.get("slow")!;
    expect(fast.end - fast.start + slow.end - slow.start).toBe(24);
    expect(work(fast) / 200).toBeCloseTo(work(slow) / 100, -1);
    const speedSplit = bottleneck(m2, [{ span: fast, speed: 200 }, { span: slow, speed: 100 }]);
    const equal = bottleneck(m2, [{ span: { start: 0, end: 12 }, speed: 100 }, {
      span: { start: 12, end: 24 },
      speed: 200,
    }]);
    expect(speedSplit).toBeLessThan(equal);
  });

  it("counts the output head: the last range gets fewer layers than an equal node before it", () => {
    const pl = plan(model({ a: 250, b: 250 }), [p("a", 100), p("b", 100)]);
    const last = [...pl.values()].find((s) => s!.end === 24)!;
    // 280 units of work in all: 14 layers before, 10 layers and the head after
    expect(last).toEqual({ start: 14, end: 24 });
    // an unmeasured node counts as the measured ones' mean, not as nothing
    const mixed = plan(model({ a: 250, b: 250 }), [p("a", 100), p("b")]);
    expect([...mixed.values()].find((s) => s!.end === 24)).toEqual({ start: 14, end: 24 });
  });

  it("puts the faster node where the head is when that unloads the slowest stage", () => {
    // the fast node is 4x: it should carry the head and most layers
    const pl = plan(model({ fast: 250, slow: 250 }), [p("slow", 100), p("fast", 400)]);
    expect(pl.get("fast")!.end).toBe(24);
    expect(pl.get("fast")!.end - pl.get("fast")!.start).toBeGreaterThan(12);
  });

  it("gives a slow node more than its share when the fast one cannot hold the rest", () => {
    // 10x faster, but the fast node holds 16 layers and the head at most: the slow one takes 8
    const pl = plan(model({ fast: 200, slow: 200 }), [p("slow", 100), p("fast", 1000)]);
    expect(spans(pl)).toEqual({ slow: "0:8", fast: "8:24" });
  });

  it("keeps what still covers the model; a newcomer adds a route or doubles the slowest range", () => {
    const m = model({ a: 200, b: 200, c: 200, d: 200, e: 200 });
    const first = plan(m, [p("a"), p("b")]);
    const held = [...first].map(([n, s]) => p(n, n === "a" ? 5 : 20, s));
    // c and d together make a second route; the first stays as it was
    const second = plan(m, [...held, p("c"), p("d")]);
    expect(second.get("a")).toEqual(first.get("a"));
    expect(second.get("b")).toEqual(first.get("b"));
    expect(gaps(24, [second.get("c")!, second.get("d")!])).toEqual([]);
    // e alone can make no route: it doubles the range with the most time per host (a's, slow)
    const third = plan(m, [...held, p("e")]);
    expect(third.get("e")).toEqual(first.get("a"));
  });

  it("fills the gap a node left around what others hold, afresh only when it must; fixed ranges count", () => {
    const m = model({ a: 200, b: 200, c: 200, d: 200 });
    // a held 0:12 and left; b still holds 12:24; c is new
    const pl = plan(m, [p("b", 0, { start: 12, end: 24 }), p("c")]);
    // b stays where it is; c fills the hole
    expect(spans(pl)).toEqual({ b: "12:24", c: "0:12" });
    // a node that only doubles a range moves into a hole before anyone else does
    const doubles = plan(m, [p("a", 0, { start: 0, end: 12 }), p("d", 0, { start: 0, end: 12 })]);
    expect(spans(doubles)).toEqual({ a: "0:12", d: "12:24" });
    // a hole too big for the newcomers: everyone is placed afresh
    const again = plan(model({ b: 200, c: 130 }), [p("b", 0, { start: 12, end: 14 }), p("c")]);
    expect(gaps(24, [...again.values()].filter((s): s is Span => !!s))).toEqual([]);
    expect(again.get("b")).not.toEqual({ start: 12, end: 14 });
    // a fixed node (explicit --layers) holds 0:10: the auto nodes cover the rest
    const fixed = plan(model({ x: 300 }), [p("x")], [{ start: 0, end: 10 }]);
    expect(fixed.get("x")).toEqual({ start: 10, end: 24 });
  });

  it("while nothing covers the model, keeps what is held and gives a newcomer the next uncovered layers", () => {
    // a holds 0:4; b is too small for 4:24 and so is everyone together: nobody moves,
    // b takes what it can right after a
    const m = model({ a: 200, b: 100 });
    const pl = plan(m, [p("a", 0, { start: 0, end: 4 }), p("b")]);
    expect(spans(pl)).toEqual({ a: "0:4", b: "4:14" });
  });

  it("leaves out a node whose cap holds no useful range", () => {
    const pl = plan(model({ a: 400, tiny: 5 }), [p("a"), p("tiny")]);
    expect(spans(pl)).toEqual({ a: "0:24", tiny: "-" });
  });

  it("plans 20,000 nodes from scratch in one pass: every node on a range it holds, the model covered", () => {
    // half the nodes hold half the model, half about a third: routes of two and of three or four
    const caps: Record<string, number> = {};
    const nodes: Participant[] = [];
    for (let i = 0; i < 20_000; i++) {
      const node = `n${i}`;
      caps[node] = i % 2 ? 170 : 110;
      nodes.push(p(node, 50 + (i % 7) * 10));
    }
    const m = model(caps);
    const pl = plan(m, nodes);
    expect(pl.size).toBe(20_000);
    const placed = [...pl.values()].filter((s): s is Span => !!s);
    expect(placed.length).toBe(20_000);
    for (const [n, s] of pl) expect(m.fits(n, s!)).toBe(true);
    expect(gaps(24, placed)).toEqual([]);
    // as many routes as the first layer has holders, and as many holders of the last
    const first = placed.filter((s) => s.start === 0).length;
    expect(placed.filter((s) => s.end === 24).length).toBe(first);
    expect(first).toBeGreaterThan(5_000);
  });
});
