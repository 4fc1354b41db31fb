import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("the bench's one-session lanes in turns", () => {
  it("decodes the whole model's greedy tokens on every route, each lane first in turn, the median of the rounds", async () => {
    const r = await denoRun(`${root}test/integration/decode-turns.deno.ts`);
    expect(r.code, r.stderr).toBe(0);
    const t = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // exact split parity within one engine and build: the lanes race on the same work
    expect(t.same_tokens).toBe(true);
    expect(t.rounds.map((x: { first: number }) => x.first)).toEqual([0, 1, 2]);
    for (const [i, xs] of (t.ratios_by_round as number[][]).entries()) {
      expect(xs).toHaveLength(3);
      for (const [k, x] of xs.entries()) {
        expect(x).toBeCloseTo(t.rounds[k].routes_tps[i] / t.rounds[k].whole_tps, 9);
      }
      expect(t.ratios[i]).toBe([...xs].sort((a, b) => a - b)[1]);
    }
  });
});
