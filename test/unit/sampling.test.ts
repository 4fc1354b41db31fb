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

describe("sampling controls", () => {
  const logits = Float32Array.from([0, 3, 2.5, -1, 1]);
  const greedy = { temperature: 0, topK: 0, topP: 1, seed: 1n };
  it("logit_bias moves a logit, and -100 bans its token", () => {
    expect(choose(logits, { ...greedy, logitBias: { 1: -100 } }, 0).token).toBe(2);
    expect(choose(logits, { ...greedy, logitBias: { 4: 2.5 } }, 0).token).toBe(4);
  });
  it("penalties count what the session generated: repeat, frequency per occurrence, presence once", () => {
    // token 1 generated twice: 3 / 1.5 = 2 < 2.5
    expect(choose(logits, { ...greedy, repeatPenalty: 1.5 }, 5, [1, 1]).token).toBe(2);
    // 3 - 2 × 0.3 = 2.4 < 2.5
    expect(choose(logits, { ...greedy, frequencyPenalty: 0.3 }, 5, [1, 1]).token).toBe(2);
    expect(choose(logits, { ...greedy, frequencyPenalty: 0.2 }, 5, [1, 1]).token).toBe(1);
    // presence counts once: 3 - 0.6 = 2.4
    expect(choose(logits, { ...greedy, presencePenalty: 0.6 }, 5, [1, 1, 1]).token).toBe(2);
    // tokens a repaired route was told of count as generated ones
    expect(choose(logits, { ...greedy, presencePenalty: 0.6, history: [1] }, 5).token).toBe(2);
  });
  it("min-p drops candidates far below the best", () => {
    const p = { temperature: 1, topK: 0, topP: 1, seed: 3n, minP: 0.5 };
    // e^-0.5 ≈ 0.61 of the best survives, e^-2 does not
    const seen = new Set(Array.from({ length: 300 }, (_, i) => choose(logits, p, i).token));
    expect(seen).toEqual(new Set([1, 2]));
  });
  it("logprobs: log-softmax of the logits after bias and penalties, the best alternatives first", () => {
    const c = choose(logits, { ...greedy, logprobs: true, topLogprobs: 3 }, 0);
    const lse = Math.log([...logits].reduce((s, l) => s + Math.exp(l), 0));
    expect(c.logprob).toBeCloseTo(3 - lse, 6);
    expect(c.top!.map((t) => t.token)).toEqual([1, 2, 4]);
    expect(c.top![1].logprob).toBeCloseTo(2.5 - lse, 6);
    expect(choose(logits, greedy, 0).logprob).toBeUndefined();
  });
});
