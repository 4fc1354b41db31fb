// The tracker's placer over time: when a plan from scratch is weighed against the plan in force.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { PlaceRequestSchema } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { Placer } from "../../src/tracker/placement/placer.ts";
import { shardMemory } from "../../src/engine/memory-cap.ts";
import type { NodeRecord } from "../../src/tracker/membership/storage.ts";
import { trackedModel } from "../fakes/tracked-model.ts";

const ARTIFACT = "cd".repeat(32);
const model = trackedModel(ARTIFACT);
const BUDGET = { kvCells: 256, maxSessions: 1, batchTokens: 16, batchInvariant: true, flashAttention: true };
const need = (start: number, end: number) =>
  shardMemory(model, { start, end }, BUDGET.kvCells, { ...BUDGET, maxSequences: 1 }).total;

/** A placer over these records (every node live), and a node's ask to it with this cap. */
function placerOver(records: Map<string, NodeRecord>, cap: bigint) {
  const placer = new Placer(model, {
    records: () => records.values(),
    record: (n) => records.get(n),
    isLive: () => true,
  }, 60_000);
  const ask = (node: string, at: number) =>
    placer.heard(
      create(PlaceRequestSchema, {
        node,
        artifactSha256: hexToBytes(ARTIFACT),
        memoryCapBytes: cap,
        engine: "native-cpu",
        ...BUDGET,
      }),
      at,
    );
  return { placer, ask };
}

describe("placer", () => {
  it("weighs a plan from scratch at most once a quiet time: under churn it is not redone every second", () => {
    // room for 4 of the 6 layers, wherever they are: a chain of two may split 2 + 4 as well as 3 + 3
    const cap = BigInt(Math.max(need(0, 4), need(1, 5), need(2, 6)) + 1);
    expect(need(0, 5)).toBeGreaterThan(Number(cap));
    const records = new Map<string, NodeRecord>();
    const { placer, ask } = placerOver(records, cap);
    let now = 1_000_000;
    for (const node of ["a", "b"]) ask(node, now);
    const held = (tokensPerS: Record<string, number>) => {
      for (const node of ["a", "b"]) {
        const span = placer.placeOf(node, now)!;
        records.set(node, {
          node,
          urls: [`http://${node}`],
          artifact: ARTIFACT,
          start: span.start,
          end: span.end,
          engine: "native-cpu",
          kvCells: 256,
          sessionCells: 256,
          maxSessions: 1,
          tokensPerS: tokensPerS[node],
          artifactUrl: "",
          memoryCapBytes: Number(cap),
          admission: "admitted",
        });
      }
    };
    const layers = (node: string) => {
      const s = placer.placeOf(node, now)!;
      return s.end - s.start;
    };
    placer.placeOf("a", now);
    const first = { a: layers("a"), b: layers("b") };
    expect(first.a + first.b).toBe(6);
    // both measured alike: past the quiet time the plan from scratch is weighed, and not taken
    held({ a: 100, b: 100 });
    now += 31_000;
    expect({ a: layers("a"), b: layers("b") }).toEqual(first);
    // five seconds later a turns out four times slower: the network changed, but the last
    // weighing is too recent to weigh again
    now += 5_000;
    held({ a: 25, b: 100 });
    now += 1_000; // the plan is looked at again at most once a second without a new ask
    expect({ a: layers("a"), b: layers("b") }).toEqual(first);
    // a quiet time after the last weighing it is weighed again, and the slow node gets less
    now += 25_000;
    expect(layers("a")).toBeLessThan(first.a);
  });

  it("publishes only lines that may have changed: a new ask's, one asked again, a forgotten one, another replica's", () => {
    const cap = BigInt(need(0, 6) + 1);
    const records = new Map<string, NodeRecord>();
    const { placer, ask } = placerOver(records, cap);
    const now = 1_000_000;
    for (const node of ["a", "b", "c"]) ask(node, now);
    placer.replan(now);
    const first = placer.published(now);
    expect(first.map((e) => e.node).sort()).toEqual(["a", "b", "c"]);
    expect(first.every((e) => e.range && e.askedAt === now)).toBe(true);
    // nothing changed: nothing to say
    expect(placer.published(now + 2_000)).toEqual([]);
    // a fourth node asks: its line only, once the plan has placed it
    ask("d", now + 3_000);
    expect(placer.published(now + 3_000).map((e) => e.node)).toEqual(["d"]);
    expect(placer.published(now + 3_000)).toEqual([]);
    // b asks again (it restarted): its line again, with the new ask's time
    ask("b", now + 4_000);
    placer.replan(now + 4_000);
    expect(placer.published(now + 4_000)).toEqual([{
      node: "b",
      range: placer.placeOf("b", now + 4_000),
      askedAt: now + 4_000,
    }]);
    placer.forget("c");
    expect(placer.published(now + 5_000)).toEqual([{ node: "c", range: undefined, askedAt: now }]);
    // a line from another replica (one that led until just now) that differs from this plan:
    // this leader says its own again
    const a = placer.placeOf("a", now + 6_000);
    placer.adopt([{ node: "a", range: { start: 0, end: 1 }, askedAt: now }]);
    expect(placer.published(now + 6_000)).toEqual([{ node: "a", range: a, askedAt: now }]);
  });
});
