import { describe, expect, it } from "vitest";
import { routeParity } from "./strata.ts";

// Routes of node processes over real seams against whole-model llama.cpp (Gate B/C):
// each session alone gives the whole model's tokens; 8 sessions of different lengths,
// greedy and seeded sampling, started 40 ms apart, give what they give alone (or a
// reported near-tie) and share batches; cancelling 2 frees exactly their cells.
describe("routes over seams (SmolLM2)", () => {
  for (
    const [split, transport] of [["0:12,12:30", "direct"], ["0:10,10:20,20:30", "direct"], [
      "0:12,12:30",
      "relay",
    ]]
  ) {
    it(`${split.split(",").length} nodes, ${transport}`, async () => {
      const r = await routeParity(["--transport", transport, "--split", split]);
      expect(r.tokens_match, JSON.stringify(r.alone_vs_whole)).toBe(true);
      expect(r.together_match, JSON.stringify(r.together.agreements)).toBe(true);
      // they share batches, a cohort at a time: of 8 sessions on a route of k shards a node takes
      // at most ceil(8 / k) at once (src/scheduler/cohorts.ts). Behind the relay fewer steps meet
      // in one: on a CPU whose step takes a few ms (AMX) the first node sees 2–3 at once
      const hops = split.split(",").length;
      const cohort = Math.ceil(8 / hops);
      expect(r.together.max_batch_sessions).toBeGreaterThanOrEqual(transport === "relay" ? 2 : cohort);
      expect(r.together.max_batch_sessions).toBeLessThanOrEqual(cohort);
      expect(r.cancel_ok, JSON.stringify(r.cancel)).toBe(true);
      expect(r.cancel.cancelled).toHaveLength(2);
      // the last shard replies straight to the driver: hops + 1 crossings a decode step; direct
      // hops take the fast seam, a hop to a node behind the relay goes through it
      expect(r.seams.crossings_per_decode_step).toBe(hops + 1);
      expect(r.seams.driver_to_first).toBe("tcp");
      expect(r.seams.node_sends.map((s: string) => s.split(": ")[1])).toEqual(
        transport === "relay" ? ["relay", "relay"] : Array(hops).fill("tcp"),
      );
      if (transport === "relay") {
        expect(r.hops.at(-1)).toMatch(/^relay\+ws:\/\//);
        // every stream through the relay was closed by both sides: the relay forgot them all
        expect(r.cancel.relay_channels_after_release).toBe(0);
      }
      expect(r.ok).toBe(true);
    });
  }

  it("3 nodes, q8 block seams through the relay: greedy sessions keep whole-model tokens but at near-ties", async () => {
    const r = await routeParity([
      "--transport",
      "relay",
      "--split",
      "0:10,10:20,20:30",
      "--compression",
      "q8",
    ]);
    expect(r.seam_compression).toBe("Q8_BLOCK32");
    // q8 moves logits by up to ~0.7 σ (docs/benchmarks.md): a greedy session may leave the whole
    // model's tokens only where its top-2 gap was small; sampled draws move with the logits
    // and are not compared with f32 here
    const greedy = r.alone_vs_whole.filter((_: unknown, s: number) => r.sampling[s] === "greedy");
    expect(greedy.length).toBe(4);
    for (const a of greedy) expect(["identical", "near_tie"], JSON.stringify(a)).toContain(a.kind);
    // batched: every session runs to its end in shared batches, token for token as alone
    // (batch-invariant nodes; q8 quantizes each row on its own, whatever shares the batch)
    expect(r.together.agreements).toHaveLength(8);
    expect(r.together_match, JSON.stringify(r.together.agreements)).toBe(true);
    expect(r.together.max_batch_sessions).toBeGreaterThanOrEqual(2);
    // cancelling two frees exactly their cells on every node
    expect(r.cancel.cancelled).toHaveLength(2);
    // (a node behind the relay answers no info calls: null)
    expect(r.cancel.kv_cells_used_after_release.every((k: { used: number | null }) => (k.used ?? 0) === 0))
      .toBe(true);
  });
});
