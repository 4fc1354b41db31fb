// A parity report's verdict in the sweep: what test/integration/parity-check.ts asserts of every
// report, so that a case moved from the suite to `strata bench parity` is held to the same.
import type { ParityReport } from "./run.ts";

export interface VerdictOptions {
  /** seams of the split: its ranges less one */
  readonly seams: number;
  /** greedy decode steps per session (`--tokens`) */
  readonly tokens: number;
  readonly sessions: number;
}

/** What the report fails, in words; empty when it passes. */
export function parityVerdict(p: ParityReport, o: VerdictOptions): string[] {
  const failed: string[] = [];
  const check = (ok: boolean, what: () => string) => {
    if (!ok) failed.push(what());
  };
  const all = o.sessions * o.tokens;
  if (p.cross_engine) {
    // other kernels: identical, or parting only where the whole model itself was a near-tie
    check(
      p.tokens_agree,
      () => `greedy tokens part beyond near-ties: ${JSON.stringify(p.alone_divergences)}`,
    );
    for (const d of p.alone_divergences) {
      const gap = "gapSigma" in d ? d.gapSigma : NaN;
      check(gap < 0.5, () => `session ${d.session} parts at a top-2 gap of ${gap} σ (under 0.5 σ allowed)`);
    }
    const cut = p.alone_divergences.reduce((n, d) => n + o.tokens - 1 - ("step" in d ? d.step : 0), 0);
    check(p.tokens_compared === all - cut, () => `${p.tokens_compared} steps compared, not ${all - cut}`);
  } else {
    check(p.tokens_match, () => `greedy tokens differ: ${JSON.stringify(p.first_mismatch)}`);
    check(p.tokens_compared === all, () => `${p.tokens_compared} steps compared, not ${all}`);
  }
  check(
    p.max_abs_diff_hidden.length === o.seams,
    () => `${p.max_abs_diff_hidden.length} seams compared, not ${o.seams}`,
  );
  check(p.hidden_within_tolerance, () => "hidden states outside their tolerance");
  for (const s of p.max_abs_diff_hidden) {
    check(
      s.diff <= s.tolerance_rel * Math.max(1, s.max_abs),
      () => `after layer ${s.after_layer}: |Δ| ${s.diff} over ${s.tolerance_rel} of ${s.max_abs}`,
    );
  }
  // batched: the sessions' prompts of different lengths, decoded in mixed batches
  check(
    new Set(p.prompt_tokens).size === o.sessions,
    () => `prompt lengths ${p.prompt_tokens.join(", ")} are not ${o.sessions} different ones`,
  );
  check(
    p.batched.max_batch_sessions === o.sessions,
    () => `at most ${p.batched.max_batch_sessions} sessions in a batch, not ${o.sessions}`,
  );
  // batch-invariant engines: batched equals alone bit for bit (no near-ties)
  check(p.batched_match, () => `batched differs from alone: ${JSON.stringify(p.batched.agreements)}`);
  check(p.batched.near_ties.length === 0, () => `${p.batched.near_ties.length} near-ties batched`);
  // releasing one session frees exactly its cells and keeps the others' cells
  check(
    p.release.cells_freed.every((c) => c === p.release.cells_expected),
    () => `release freed ${p.release.cells_freed.join(", ")} cells, not ${p.release.cells_expected} each`,
  );
  check(p.release.others_cells_kept, () => "release took other sessions' cells");
  for (const a of p.release.others_after_release) {
    check(!a || a.kind === "identical", () => `after the release: ${JSON.stringify(a)}`);
  }
  check(
    p.kv_cells_used_after_alone.every((c) => c === 0),
    () => `cells left after the sessions alone: ${p.kv_cells_used_after_alone.join(", ")}`,
  );
  check(p.ok, () => "the report is not ok");
  return failed;
}
