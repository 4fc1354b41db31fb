import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

// The README's example (two shards in one process, the real sampler) is run as a user runs
// it and must answer as whole-model llama.cpp does.
describe("examples/route.ts", () => {
  it("generates the whole model's greedy answer", async () => {
    const r = await denoRun(`${root}test/integration/example.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(out.code, out.stderr).toBe(0);
    expect(out.text.length).toBeGreaterThan(0);
    // split and whole run the same kernels: the same text, or a divergence only at a near-tie
    if (out.text !== out.reference) expect(out.divergence.nearTie, JSON.stringify(out)).toBe(true);
    console.log(`example: ${JSON.stringify(out.text)} (whole model: ${JSON.stringify(out.reference)})`);
  });
});
