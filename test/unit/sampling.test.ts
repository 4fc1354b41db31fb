import { describe, expect, it } from "vitest";
import { choose } from "../../src/sampling/sampler.ts";
import { uniformAt } from "../../src/sampling/draw.ts";

describe("sampling", () => {
  const logits = Float32Array.from([0, 3, 2.5, -1, 1]);
  it("greedy takes the best logit and reports the top-2 gap", () => {
    expect(choose(logits, undefined, 0)).toEqual({ token: 1, margin: 0.5 });
  });
  it("draws depend on seed and position only, and respect top-k", () => {
    const p = { temperature: 1, topK: 2, topP: 1, seed: 42n };
    const a = Array.from({ length: 200 }, (_, i) => choose(logits, p, i).token);
    expect(a).toEqual(Array.from({ length: 200 }, (_, i) => choose(logits, p, i).token));
    expect(new Set(a)).toEqual(new Set([1, 2]));
    // frequencies follow softmax over the two: e^0.5 / (1 + e^0.5) ≈ 0.62
    const share = a.filter((t) => t === 1).length / a.length;
    expect(share).toBeGreaterThan(0.5);
    expect(share).toBeLessThan(0.75);
    expect(uniformAt(1n, 5)).not.toBe(uniformAt(2n, 5));
    expect(uniformAt(1n, 5)).toBe(uniformAt(1n, 5));
  });
  it("top-p keeps the smallest prefix reaching p", () => {
    const p = { temperature: 1, topK: 0, topP: 0.1, seed: 7n };
    for (let i = 0; i < 50; i++) expect(choose(logits, p, i).token).toBe(1);
  });
});
