// Cohorts: the decoding sessions of a route of k shards take turns in k groups. A route whose
// sessions all step together runs in lockstep: while one shard computes the batch, the others
// wait for it. Split into k cohorts, shard 1 computes cohort A while shard 2 computes cohort B,
// and every shard stays busy. A shard never idles for a turn: the cohort held back goes in the
// very next batch. Which sessions form a cohort is never agreed on: a shard takes the steps that
// waited longest, so what came in one batch from the shard before leaves in one batch again.

declare const shardsBrand: unique symbol;
/** Shards in a session's whole route (1: alone, or an owner that did not say). */
export type RouteShards = number & { readonly [shardsBrand]: true };

/** More shards than any route has: a peer's number past it is not believed. */
const MAX_ROUTE_SHARDS = 1024;

export function routeShards(n: number | undefined): RouteShards {
  return (Number.isInteger(n) && n! >= 1 && n! <= MAX_ROUTE_SHARDS ? n : 1) as RouteShards;
}

/**
 * A session counts toward its route's cohorts while it has work here or took a step this
 * recently: between two steps of one session a shard sees nothing of it for a whole trip
 * round the route.
 */
export const DECODING_WITHIN_MS = 5_000;

interface SessionView {
  readonly shards: RouteShards;
  readonly queue: { readonly length: number };
  readonly inEngine: number;
  readonly lastUsed: number;
}

/** How many more steps one batch may take of each route length's sessions. */
export class CohortCaps {
  readonly #left = new Map<number, number>();
  /** a step was held back for its cohort's turn */
  held = false;

  constructor(sessions: Iterable<SessionView>, now = Date.now()) {
    const decoding = new Map<number, number>();
    for (const s of sessions) {
      if (s.shards <= 1) continue;
      if (s.queue.length === 0 && s.inEngine === 0 && now - s.lastUsed > DECODING_WITHIN_MS) continue;
      decoding.set(s.shards, (decoding.get(s.shards) ?? 0) + 1);
    }
    for (const [k, n] of decoding) this.#left.set(k, Math.ceil(n / k));
  }

  /** Whether one more step of a session on a route of `shards` shards fits this batch. */
  take(shards: RouteShards): boolean {
    const left = this.#left.get(shards);
    if (left === undefined) return true;
    if (left <= 0) {
      this.held = true;
      return false;
    }
    this.#left.set(shards, left - 1);
    return true;
  }
}
