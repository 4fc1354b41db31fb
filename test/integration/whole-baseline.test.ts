import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("the benchmarks' whole-model baseline (greedy steps in the shard process)", () => {
  it("picks what the logits say, one session or two in a batch, and times no more than the parent waited", async () => {
    const r = await denoRun(`${root}test/integration/whole-baseline.deno.ts`);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(out.byLogits[0]).toHaveLength(8);
    expect(out.byGreedy).toEqual(out.byLogits);
    // the two prompts are the same: so are their tokens, batched or not
    expect(out.byLogits[1]).toEqual(out.byLogits[0]);
    expect(out.timesWithinWall).toBe(true);
  });
});
