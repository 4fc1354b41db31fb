// Whether a node's decoding sessions take turns in cohorts (cohorts.ts), decided from what one
// decode step costs it alone and in a batch, as the node timed them at load (node/measure.ts).
//
// A batch of b sessions costs about a + s·b: `a` streams the range's weights once, `s` is each
// session's own arithmetic. Two cohorts of n/2 in place of one batch of n, on a route whose
// shards can overlap: each shard's turn shrinks from a + s·n to a + s·n/2 (it saves s·n/2 of
// the critical path), but the shard streams its weights twice (a whole `a` more of its core's
// work). Where the shards have cores of their own only the saving counts; where they share
// cores the extra work counts in full. Cohorts are kept only where they save at least what
// they cost: s·n/2 ≥ a, i.e. a batch of n costs three times its weights' pass or more. A
// memory-bound range (a GPU's, a big range on a CPU that computes faster than it reads) batches
// all it has; a compute-bound one takes turns.

/** One decode step alone and `batchSessions` in one batch, as a node timed them (ms). */
export interface BatchCost {
  readonly oneMs: number;
  readonly batchMs: number;
  readonly batchSessions: number;
}

/** The rule above, for a batch the size of the measured one. */
export function cohortsPay(c: BatchCost): boolean {
  const n = c.batchSessions;
  if (!(n >= 2) || !(c.oneMs > 0) || !(c.batchMs > 0)) return false;
  // the line through (1, oneMs) and (n, batchMs)
  const perSession = Math.max(0, (c.batchMs - c.oneMs) / (n - 1));
  const weights = Math.max(0, c.oneMs - perSession);
  return (perSession * n) / 2 >= weights;
}

/** What decided a node's cohorts: its command line, its measured cost, or (unmeasured) its backend. */
export type CohortsBy = "set" | "measured" | "backend";

/**
 * A node's cohorts: as it was told (`set`), else as its measured cost says, else (no batch could
 * be measured: an engine that gives one sequence) by its backend (`byBackend`).
 */
export function decideCohorts(
  set: boolean | undefined,
  cost: BatchCost | undefined,
  byBackend: boolean,
): { readonly cohorts: boolean; readonly by: CohortsBy } {
  if (set !== undefined) return { cohorts: set, by: "set" };
  if (cost) return { cohorts: cohortsPay(cost), by: "measured" };
  return { cohorts: byBackend, by: "backend" };
}
