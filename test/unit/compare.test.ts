import { describe, expect, it } from "vitest";
import { agreement, forcedAgreement, maxAbsDiff, sigma, top2 } from "../../src/parity/compare.ts";

const row = (...v: number[]) => Float32Array.from(v);
const step = (token: number, logits: Float32Array) => ({ token, logits });
// logits with σ = 10: a spread of ±10 around 0, and two candidates at the top
const logits = (a: number, b: number) => row(-10, 10, -10, 10, -10, 10, a, b);

describe("parity comparisons", () => {
  it("finds the greedy pick and its margin", () => {
    expect(top2(row(0.1, 3, 2.5, -1))).toEqual({ best: 1, second: 2, gap: 0.5 });
    expect(top2(row(2, 2)).best).toBe(0);
    expect(sigma(row(-10, 10))).toBe(10);
  });

  it("reports NaN as a difference, never as agreement", () => {
    expect(maxAbsDiff(row(1, NaN), row(1, 2))).toBeNaN();
    expect(maxAbsDiff(row(1, 2), row(1, 2.5))).toBe(0.5);
  });

  it("calls a divergence a near-tie only at a small gap (in σ) after close logits", () => {
    const tol = { tieGapSigma: 0.02, logitTolSigma: 0.02 };
    const ref = [step(6, logits(20, 5)), step(6, logits(20.1, 20))];
    expect(agreement(ref, ref, tol)).toMatchObject({ kind: "identical", steps: 2, maxDiffSigma: 0 });
    // gap 0.1 with σ ≈ 10.6: under 2 % σ; earlier drift 0.05: under 2 % σ
    const close = [step(6, logits(20.05, 5)), step(7, logits(20, 20.1))];
    expect(agreement(ref, close, tol).kind).toBe("near_tie");
    // the same divergence after earlier logits drifted by 1.0 (≈ 9 % σ) is a mismatch
    const drifted = [step(6, logits(21, 5)), step(7, logits(20, 20.1))];
    expect(agreement(ref, drifted, tol).kind).toBe("mismatch");
    // a wide gap is never a tie
    const wide = [step(6, logits(20, 5)), step(6, logits(25, 20))];
    expect(agreement(wide, close, tol)).toMatchObject({ kind: "mismatch", step: 1 });
  });

  it("judges teacher-forced runs step by step: a near-tie anywhere, drift nowhere", () => {
    const tol = { tieGapSigma: 0.02, logitTolSigma: 0.02 };
    const ref = [step(6, logits(20.1, 20)), step(6, logits(20, 5)), step(7, logits(20, 20.1))];
    expect(forcedAgreement(ref, ref, tol)).toMatchObject({ kind: "identical", steps: 3, divergences: [] });
    // both close calls flip (fed the same tokens, the later steps are still compared)
    const flips = [step(7, logits(20.05, 20.1)), step(6, logits(20, 5)), step(6, logits(20.1, 20))];
    const r = forcedAgreement(ref, flips, tol);
    expect(r.kind).toBe("near_tie");
    expect(r.divergences.map((d) => d.step)).toEqual([0, 2]);
    // a flip at a wide gap, or any step's logits drifting past the tolerance, is a mismatch
    expect(forcedAgreement(ref, [ref[0], step(7, logits(20, 5)), ref[2]], tol).kind).toBe("mismatch");
    expect(forcedAgreement(ref, [ref[0], step(6, logits(21, 5)), ref[2]], tol).kind).toBe("mismatch");
  });
});
