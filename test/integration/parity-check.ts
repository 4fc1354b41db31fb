// The whole-model parity report of `strata parity` (in-process harness) and what every
// backend must show in it: identical greedy tokens, seams within the report's tolerance,
// batched sessions matching, exact release.
import { expect } from "vitest";
import { strata } from "./strata.ts";

export async function parity(args: string[]) {
  const r = await strata(["parity", "--json", "--tokens", "32", "--sessions", "4", ...args]);
  if (!r.stdout.trim().startsWith("{")) throw new Error(`parity printed no report:\n${r.stderr}`);
  return { code: r.code, report: JSON.parse(r.stdout), stderr: r.stderr };
}

/**
 * A batched run known to part from its lone runs on this machine, and why: its sessions must
 * still give the same tokens, within `maxSigma` of their lone logits (the report says by how much).
 */
export interface KnownBatchedGap {
  readonly why: string;
  readonly maxSigma: number;
}

export function expectParity(r: Awaited<ReturnType<typeof parity>>, seams: number, gap?: KnownBatchedGap) {
  const p = r.report;
  if (p.cross_engine) {
    // other kernels: identical, or parting only where the whole model itself was a near-tie
    expect(p.tokens_agree, JSON.stringify(p.alone_divergences)).toBe(true);
    for (const d of p.alone_divergences) expect(d.gapSigma).toBeLessThan(0.5);
    const cut = p.alone_divergences.reduce((n: number, d: { step: number }) => n + 31 - d.step, 0);
    expect(p.tokens_compared).toBe(4 * 32 - cut);
  } else {
    expect(p.tokens_match, JSON.stringify(p.first_mismatch)).toBe(true);
    expect(p.tokens_compared).toBe(4 * 32);
  }
  expect(p.max_abs_diff_hidden).toHaveLength(seams);
  expect(p.hidden_within_tolerance).toBe(true);
  for (const s of p.max_abs_diff_hidden) {
    expect(s.diff).toBeLessThanOrEqual(s.tolerance_rel * Math.max(1, s.max_abs));
  }
  // batched: 4 sessions of different prompt lengths decoded in mixed batches
  expect(new Set(p.prompt_tokens).size).toBe(4);
  expect(p.batched.max_batch_sessions).toBe(4);
  // batch-invariant engines: batched equals alone bit for bit (no near-ties)
  if (gap && !p.batched_match) {
    console.warn(`known gap: ${gap.why}: ${JSON.stringify(p.batched.agreements)}`);
    for (const a of p.batched.agreements) {
      expect(a.kind, JSON.stringify(a)).toBe("identical");
      expect(a.maxDiffSigma).toBeLessThan(gap.maxSigma);
    }
  } else {
    expect(p.batched_match, JSON.stringify(p.batched.agreements)).toBe(true);
  }
  expect(p.batched.near_ties).toEqual([]);
  // releasing one session frees exactly its cells and keeps the others' cells
  expect(p.release.cells_freed.every((c: number) => c === p.release.cells_expected)).toBe(true);
  expect(p.release.others_cells_kept).toBe(true);
  for (const a of p.release.others_after_release) {
    if (a) expect(a.kind, JSON.stringify(a)).toBe("identical");
  }
  expect(p.kv_cells_used_after_alone.every((c: number) => c === 0)).toBe(true);
  if (!gap || p.batched_match) {
    expect(p.ok).toBe(true);
    expect(r.code).toBe(0);
  }
}
