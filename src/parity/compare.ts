// Pure comparisons for parity runs: greedy picks, gaps and differences.
import { BATCH_TOLERANCE, type BatchTolerance } from "./tolerance.ts";

export interface Top2 {
  readonly best: number;
  readonly second: number;
  readonly gap: number;
}

/** Top-2 of one logits row (ties go to the lower id, as llama.cpp's greedy sampler does). */
export function top2(row: Float32Array): Top2 {
  let best = 0;
  let second = -1;
  for (let i = 1; i < row.length; i++) {
    if (row[i] > row[best]) {
      second = best;
      best = i;
    } else if (second < 0 || row[i] > row[second]) {
      second = i;
    }
  }
  return { best, second, gap: second < 0 ? Infinity : row[best] - row[second] };
}

export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new Error(`cannot compare ${a.length} with ${b.length} values`);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (Number.isNaN(d)) return NaN; // fails every tolerance
    if (d > m) m = d;
  }
  return m;
}

/** Standard deviation of a logits row: the unit parity tolerances are stated in. */
export function sigma(a: Float32Array): number {
  let sum = 0;
  let sq = 0;
  for (const v of a) {
    sum += v;
    sq += v * v;
  }
  const mean = sum / a.length;
  return Math.sqrt(Math.max(0, sq / a.length - mean * mean));
}

export function maxAbs(a: Float32Array): number {
  let m = 0;
  for (const v of a) m = Math.max(m, Math.abs(v));
  return m;
}

/** One generated step: the token picked and the logits it was picked from. */
export interface Step {
  readonly token: number;
  readonly logits: Float32Array;
}

/** gap and drift in logits, and in units of the reference's σ at that step. */
export interface Divergence {
  readonly step: number;
  readonly gap: number;
  readonly gapSigma: number;
  readonly maxLogitDiffBefore: number;
  readonly maxDiffSigmaBefore: number;
}

export type Agreement =
  | { readonly kind: "identical"; readonly steps: number; readonly maxDiffSigma: number }
  | ({ readonly kind: "near_tie" } & Divergence)
  | ({ readonly kind: "mismatch" } & Divergence);

/**
 * Compares a run against its reference step by step. The first divergence is a
 * near-tie only when the reference's top-2 gap there is under tol.tieGapSigma and all
 * earlier logits agree within tol.logitTolSigma (both in units of the step's σ); after a
 * divergence the runs differ by construction, so comparison stops there.
 */
export function agreement(
  reference: readonly Step[],
  run: readonly Step[],
  tol: BatchTolerance = BATCH_TOLERANCE,
): Agreement {
  const n = Math.min(reference.length, run.length);
  let before = 0;
  let beforeSigma = 0;
  for (let i = 0; i < n; i++) {
    const ref = reference[i].logits;
    if (reference[i].token !== run[i].token) {
      const gap = top2(ref).gap;
      const gapSigma = gap / sigma(ref);
      const nearTie = gapSigma < tol.tieGapSigma && beforeSigma <= tol.logitTolSigma;
      return {
        kind: nearTie ? "near_tie" : "mismatch",
        step: i,
        gap,
        gapSigma,
        maxLogitDiffBefore: before,
        maxDiffSigmaBefore: beforeSigma,
      };
    }
    const d = maxAbsDiff(ref, run[i].logits);
    before = Math.max(before, d);
    beforeSigma = Math.max(beforeSigma, d / sigma(ref));
    if (Number.isNaN(d)) beforeSigma = NaN;
  }
  return { kind: "identical", steps: n, maxDiffSigma: beforeSigma };
}

/** A route's tokens against the whole model's steps, when the route returns tokens only. */
export type TokenAgreement =
  | { readonly kind: "identical"; readonly steps: number }
  | { readonly kind: "near_tie" | "mismatch"; readonly step: number; readonly gapSigma: number };

/**
 * The first divergence is a near-tie only when the reference was itself that close to
 * choosing otherwise: its margin (top-2 gap in σ units, greedy) under tieSigma.
 */
export function tokenAgreement(
  reference: readonly { token: number; marginSigma: number }[],
  run: readonly number[],
  tieSigma: number,
): TokenAgreement {
  const n = Math.min(reference.length, run.length);
  for (let i = 0; i < n; i++) {
    if (reference[i].token === run[i]) continue;
    const gapSigma = reference[i].marginSigma;
    return { kind: gapSigma < tieSigma ? "near_tie" : "mismatch", step: i, gapSigma };
  }
  return { kind: "identical", steps: n };
}

/** A teacher-forced comparison: both runs were fed the same tokens. */
export interface ForcedAgreement {
  readonly kind: "identical" | "near_tie" | "mismatch";
  readonly steps: number;
  /** the steps whose picks differ, each with the reference's top-2 gap there */
  readonly divergences: readonly (Divergence & { readonly nearTie: boolean })[];
  /** the largest logit difference of any step, in units of that step's σ */
  readonly maxDiffSigma: number;
}

/**
 * Runs fed the same tokens (teacher-forced) are independent step by step, so each step is
 * judged on its own: a differing pick is a near-tie when the reference's top-2 gap there is
 * under tol.tieGapSigma, and every step's logits must agree within tol.logitTolSigma.
 */
export function forcedAgreement(
  reference: readonly Step[],
  run: readonly Step[],
  tol: BatchTolerance,
): ForcedAgreement {
  const n = Math.min(reference.length, run.length);
  const divergences: (Divergence & { nearTie: boolean })[] = [];
  let maxDiffSigma = 0;
  for (let i = 0; i < n; i++) {
    const ref = reference[i].logits;
    const s = sigma(ref);
    const d = maxAbsDiff(ref, run[i].logits) / s;
    maxDiffSigma = Number.isNaN(d) ? NaN : Math.max(maxDiffSigma, d);
    if (reference[i].token === run[i].token) continue;
    const gap = top2(ref).gap;
    divergences.push({
      step: i,
      gap,
      gapSigma: gap / s,
      maxLogitDiffBefore: d * s,
      maxDiffSigmaBefore: d,
      nearTie: gap / s < tol.tieGapSigma,
    });
  }
  const drifted = !(maxDiffSigma <= tol.logitTolSigma);
  const kind = drifted || divergences.some((d) => !d.nearTie)
    ? "mismatch"
    : divergences.length
    ? "near_tie"
    : "identical";
  return { kind, steps: n, divergences, maxDiffSigma };
}
