// The most a route can decode on a machine whose cores its stages share: with every core busy
// on engine work all the time, `cores` core-seconds a second over the core-seconds a token
// costs all the stages together. Each stage's cost comes from its node's own timing at load
// (NodeInfo.batch_cost: a step alone and a batch, timed while the rest of the network was idle),
// at the batch the stage ran in the measurement (its telemetry), times its engine threads.

/** One stage of a route: what its node timed at load, and its engine threads. */
export interface StageCost {
  readonly oneMs: number;
  readonly batchMs: number;
  readonly batchSessions: number;
  readonly threads: number;
}

/** A step of `b` sessions, ms: the line through (1, oneMs) and (batchSessions, batchMs). */
export function stepMsAt(c: StageCost, b: number): number {
  if (!(c.batchSessions >= 2)) return c.oneMs * Math.max(1, b);
  const perSession = (c.batchMs - c.oneMs) / (c.batchSessions - 1);
  return Math.max(0, c.oneMs + perSession * (Math.max(1, b) - 1));
}

/** Core-seconds one token costs the stage when it steps `b` sessions at once. */
export const coreSecondsPerToken = (c: StageCost, b: number): number =>
  (c.threads * stepMsAt(c, b)) / Math.max(1, b) / 1000;

/** cores / the sum over stages of core-seconds per token, each stage at its batch: tok/s. */
export function pipelineCeiling(
  stages: readonly { readonly cost: StageCost; readonly batch: number }[],
  cores: number,
): number {
  const perToken = stages.reduce((s, x) => s + coreSecondsPerToken(x.cost, x.batch), 0);
  return perToken > 0 ? cores / perToken : 0;
}

/** One session, one stage at a time: 1 / the sum of the stages' steps alone, tok/s. */
export function oneSessionCeiling(stages: readonly StageCost[]): number {
  const ms = stages.reduce((s, c) => s + c.oneMs, 0);
  return ms > 0 ? 1000 / ms : 0;
}
