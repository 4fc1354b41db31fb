import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("Gemma 3 270M through strata up (a route of two over real seams)", () => {
  it("completes prompts with whole-model llama.cpp's greedy text, alone and batched", async () => {
    const r = await denoRun(`${root}test/integration/gemma3.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    const want: string[] = out.reference;
    for (const [i, a] of out.alone.entries()) {
      expect(a.status).toBe(200);
      expect(a.text, `prompt ${i}`).toBe(want[i]);
      expect(a.strata.nodes.map((n: { layers: string }) => n.layers)).toEqual(["0:9", "9:18"]);
      expect(a.strata.crossings_per_step).toBe(3);
    }
    // the long prompt ran past the sliding window
    expect(out.alone[3].usage.prompt_tokens).toBeGreaterThan(512);
    // batch-invariant nodes: four at once give the same text as one at a time
    for (const [i, t] of out.together.entries()) {
      expect(t.status).toBe(200);
      expect(t.done).toBe(true);
      expect(t.text, JSON.stringify(out.divergence[i])).toBe(want[i]);
    }
    // a base model has no chat template: chat is refused with the reason
    expect(out.chat).toBe(400);
  });
});
