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
      expect(r.together.max_batch_sessions).toBeGreaterThanOrEqual(4);
      expect(r.cancel_ok, JSON.stringify(r.cancel)).toBe(true);
      expect(r.cancel.cancelled).toHaveLength(2);
      if (transport === "relay") expect(r.hops.at(-1)).toMatch(/^relay\+ws:\/\//);
      expect(r.ok).toBe(true);
    });
  }
});
