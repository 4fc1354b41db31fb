// The tracker's long passes (a placement plan, the route pool) worked out in slices between
// calls (src/tracker/steps.ts): the same result as at once, and answers from the last result
// until the new one lands.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { PlaceRequestSchema } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { type Participant, plan, planSteps, type Span } from "../../src/tracker/placement/placement.ts";
import { Placer } from "../../src/tracker/placement/placer.ts";
import { RoutePool } from "../../src/tracker/routes/route-pool.ts";
import { type Candidate, disjointRoutes, disjointRouteSteps } from "../../src/tracker/routes/select.ts";
import { runAll, slicer, type Steps } from "../../src/tracker/steps.ts";
import type { NodeRecord } from "../../src/tracker/membership/storage.ts";
import { trackedModel } from "../fakes/tracked-model.ts";

/** A give-way that queues the rest of a pass until the test lets it run. */
function manualTurns() {
  const queue: Array<() => void> = [];
  return {
    giveWay: (resume: () => void) => void queue.push(resume),
    get waiting() {
      return queue.length;
    },
    /** runs every slice queued (and those they queue); how many ran */
    drain(): number {
      let n = 0;
      for (; queue.length > 0; n++) queue.shift()!();
      return n;
    },
  };
}

// 24 layers; caps of 110 or 170 units hold about a third or half of the model
const need = (s: Span) => (s.end - s.start) * 10 + (s.start === 0 ? 40 : 0) + (s.end === 24 ? 40 : 0);
const bigNetwork = (n: number) => {
  const caps = new Map<string, number>();
  const nodes: Participant[] = [];
  for (let i = 0; i < n; i++) {
    caps.set(`n${i}`, i % 2 ? 170 : 110);
    nodes.push({ node: `n${i}`, speed: 50 + (i % 7) * 10 });
  }
  return {
    model: {
      nLayer: 24,
      fits: (node: string, s: Span) => need(s) <= caps.get(node)!,
      work: (s: Span) => (s.end - s.start) * 10 + (s.end === 24 ? 40 : 0),
    },
    nodes,
  };
};

describe("sliced passes", () => {
  it("a plan over 5,000 nodes in slices gives way many times and comes out as the plan made at once", () => {
    const { model, nodes } = bigNetwork(5_000);
    const turns = manualTurns();
    let out: ReadonlyMap<string, Span | undefined> | undefined;
    let busy = -1;
    // a slice of 0 ms: it gives way wherever the pass yields
    slicer(turns.giveWay, 0)(planSteps(model, nodes), (v, ms) => {
      out = v;
      busy = ms;
    }, (e) => {
      throw e;
    });
    expect(out).toBeUndefined();
    expect(turns.drain()).toBeGreaterThan(50);
    expect(busy).toBeGreaterThan(0);
    expect([...out!]).toEqual([...plan(model, nodes)]);
  });

  it("a pass that throws is reported, not lost", () => {
    const turns = manualTurns();
    let failed: unknown;
    const steps = (function* (): Steps<number> {
      yield;
      throw new Error("broken pass");
    })();
    slicer(turns.giveWay, 0)(steps, () => expect.unreachable(), (e) => failed = e);
    turns.drain();
    expect(String(failed)).toContain("broken pass");
  });

  it("the route pool in slices: requests take the last pool until the new one lands", () => {
    const cands = (n: number, prefix: string): Candidate[] =>
      Array.from({ length: n }, (_, i) => ({
        node: `${prefix}${i}`,
        url: `http://${prefix}${i}`,
        range: i % 2 ? { start: 12, end: 24 } : { start: 0, end: 12 },
        load: 0,
        tokensPerS: 10 + (i % 5),
        kvCells: 256,
        sessionCells: 256,
      }));
    expect(runAll(disjointRouteSteps(cands(400, "x"), 24, Infinity))).toEqual(
      disjointRoutes(cands(400, "x"), 24, Infinity),
    );
    let network = cands(400, "old");
    const turns = manualTurns();
    const pool = new RoutePool(
      () => disjointRouteSteps(network, 24, Infinity),
      () => 0.5,
      slicer(turns.giveWay, 0),
    );
    const free = () => 0;
    // the first pool is needed at once
    expect(pool.pick(1, 1, 0, free).routes[0][0].node).toMatch(/^old/);
    expect(turns.waiting).toBe(0);
    // the network changed and a rebuild is due: it runs in slices, the old pool answers
    network = cands(400, "new");
    expect(pool.pick(1, 2, 2_000, free).routes[0][0].node).toMatch(/^old/);
    expect(turns.waiting).toBe(1);
    expect(pool.pick(1, 2, 2_001, free).routes[0][0].node).toMatch(/^old/);
    expect(turns.drain()).toBeGreaterThan(3);
    expect(pool.pick(1, 2, 2_002, free).routes[0][0].node).toMatch(/^new/);
    // a request that finds every route gone has one built at once, slices or not
    network = cands(400, "newer");
    const gone = (route: readonly Candidate[]) => route[0].node.startsWith("newer") ? 0 : undefined;
    expect(pool.pick(1, 3, 2_200, gone).routes[0][0].node).toMatch(/^newer/);
  });

  it("the placer in slices: asks wait for the plan to land, a node forgotten meanwhile stays out", () => {
    const ARTIFACT = "cd".repeat(32);
    const model = trackedModel(ARTIFACT);
    const records = new Map<string, NodeRecord>();
    const turns = manualTurns();
    let landed = 0;
    const placer = new Placer(
      model,
      {
        records: () => records.values(),
        record: (n) => records.get(n),
        isLive: () => true,
      },
      60_000,
      { slicer: slicer(turns.giveWay, 0), onPlanned: () => landed++ },
    );
    const now = 1_000_000;
    // enough asks that the plan yields (and so gives way) before it is done
    const nodes = Array.from({ length: 600 }, (_, i) => `n${i}`);
    for (const node of nodes) {
      placer.heard(
        create(PlaceRequestSchema, {
          node,
          artifactSha256: hexToBytes(ARTIFACT),
          memoryCapBytes: 1n << 34n,
          engine: "native-cpu",
          kvCells: 256,
          maxSessions: 1,
          batchTokens: 16,
          batchInvariant: true,
          flashAttention: true,
        }),
        now,
      );
    }
    placer.replan(now);
    expect(placer.working).toBe(true);
    // not answered until the plan lands; nothing published yet
    expect(placer.answered("n0")).toBe(-Infinity);
    expect(placer.placeOf("n0", now)).toBeUndefined();
    expect(placer.published(now)).toEqual([]);
    placer.forget("n599");
    expect(turns.drain()).toBeGreaterThan(0);
    expect(landed).toBe(1);
    expect(placer.working).toBe(false);
    expect(placer.answered("n0")).toBe(now);
    // each holds the whole model: a route of its own
    for (const node of nodes.slice(0, 599)) expect(placer.placeOf(node, now)).toEqual({ start: 0, end: 6 });
    expect(placer.plan(now).has("n599")).toBe(false);
    // the placed lines, and the forgotten ask's line saying it is gone
    const lines = placer.published(now);
    expect(lines.filter((e) => e.range).length).toBe(599);
    expect(lines.filter((e) => !e.range)).toEqual([{ node: "n599", range: undefined, askedAt: now }]);
  });
});
