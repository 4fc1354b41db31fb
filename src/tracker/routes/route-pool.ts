// Routes for new sessions in a large network. Every disjoint route over thousands of nodes
// cannot be worked out per request (each route is a pass over all nodes): the pool works them
// out once, by speed alone, and again when the network changed and a while has passed. A
// request then looks at a few of them picked at random and takes the least loaded that is
// free, so requests spread over the whole network and cost the same at any size. Load is read
// per request; only who is in which route can be a second old.
import type { Candidate } from "./select.ts";
import { runAll, type Slicer, type Steps } from "../steps.ts";

/** The pool is worked out again at most this often (ms), and only after a change... */
export const POOL_REBUILD_MS = 1000;
/** ... or when it is this old: leases that lapse change the network without a word. */
const POOL_MAX_AGE_MS = 10_000;
/** A request that found every pooled route full or gone has the pool worked out again at once,
 *  but not more often than this: under saturation every request finds them full. */
const POOL_FORCED_MS = 100;
/** Routes a request looks at before it takes the least loaded of them. */
const SAMPLES = 8;

/** What a request needs to know of a route now: its load (≥ 1: full), or undefined when a
 *  node on it is gone or not admitted any more. */
export type RouteLoad = (route: readonly Candidate[]) => number | undefined;

export class RoutePool {
  #routes: Candidate[][] = [];
  #builtAt = -Infinity;
  #builtFor = -1;
  /** node → its pooled route (routes are disjoint) */
  #routeOf = new Map<string, number>();
  /**
   * The network version at which a look at every route found none free, or -1. Until the
   * version changes, only routes a node of which has released a session since (`released`) can
   * have become free: a full network answers busy without a pass over every route, which at
   * saturation would be the cost of every request.
   */
  #fullAt = -1;
  readonly #maybeFree = new Set<number>();
  /** a pool is being worked out in slices: requests use the last one until it lands */
  #building = false;

  constructor(
    /** every disjoint route, best first, by speed alone */
    private readonly build: () => Steps<Candidate[][]>,
    private readonly random: () => number = Math.random,
    /** rebuilds that are due run in slices through it (a forced one runs at once) */
    private readonly slicer?: Slicer,
  ) {}

  /** A session on `node` ended or lapsed: its route may be free again. */
  released(node: string): void {
    if (this.#fullAt < 0) return;
    const i = this.#routeOf.get(node);
    if (i !== undefined) this.#maybeFree.add(i);
  }

  /** The routes as of `version` of the network (rebuilt when it changed, at most once a
   *  POOL_REBUILD_MS, or when stale routes found nothing free). */
  #routesFor(version: number, now: number, force: boolean): readonly Candidate[][] {
    const changed = version !== this.#builtFor;
    const age = now - this.#builtAt;
    if ((changed && age >= (force ? POOL_FORCED_MS : POOL_REBUILD_MS)) || age >= POOL_MAX_AGE_MS) {
      // the first pool, and one a request found nothing in, are needed now
      if (!this.slicer || force || this.#builtAt === -Infinity) {
        this.#use(runAll(this.build()), version, now);
      } else if (!this.#building) {
        this.#building = true;
        this.slicer(this.build(), (routes) => {
          this.#building = false;
          // a forced rebuild since is newer
          if (this.#builtAt <= now) this.#use(routes, version, now);
        }, () => {
          this.#building = false;
        });
      }
    }
    return this.#routes;
  }

  #use(routes: Candidate[][], version: number, now: number): void {
    this.#routes = routes;
    this.#routeOf = new Map(routes.flatMap((rt, i) => rt.map((c) => [c.node, i] as const)));
    this.#builtAt = now;
    this.#builtFor = version;
    this.#fullAt = -1;
  }

  /**
   * The pooled route with room through the most of `nodes` (those that hold a session's prompt
   * prefix), the least loaded of equals; undefined when none goes through any.
   */
  through(nodes: readonly string[], version: number, now: number, load: RouteLoad): Candidate[] | undefined {
    const routes = this.#routesFor(version, now, false);
    const votes = new Map<number, number>();
    for (const n of nodes) {
      const i = this.#routeOf.get(n);
      if (i !== undefined) votes.set(i, (votes.get(i) ?? 0) + 1);
    }
    let best: { i: number; votes: number; load: number } | undefined;
    for (const [i, v] of votes) {
      const l = load(routes[i]);
      if (l === undefined || l >= 1) continue;
      if (!best || v > best.votes || (v === best.votes && l < best.load)) best = { i, votes: v, load: l };
    }
    return best && routes[best.i];
  }

  /**
   * Up to `count` routes, least loaded of those looked at first. A few picked at random are
   * looked at, then, if none of them is free, all of them in turn. None free: `busy` says
   * whether a route was there, only full.
   */
  pick(
    count: number,
    version: number,
    now: number,
    load: RouteLoad,
  ): { routes: Candidate[][]; busy: boolean } {
    let found = this.#pick(this.#routesFor(version, now, false), count, version, load);
    if (found.routes.length === 0) {
      // maybe the pool is behind the network: once more from a fresh one
      found = this.#pick(this.#routesFor(version, now, true), count, version, load);
    }
    return found;
  }

  #pick(routes: readonly Candidate[][], count: number, version: number, load: RouteLoad) {
    const want = Math.max(1, count);
    const seen = new Set<number>();
    const free: Array<{ i: number; load: number }> = [];
    let busy = false;
    const look = (i: number) => {
      if (seen.has(i)) return;
      seen.add(i);
      const l = load(routes[i]);
      if (l !== undefined && l < 1) free.push({ i, load: l });
      else if (l !== undefined) busy = true;
    };
    if (this.#fullAt === version) {
      // full when last looked at: only what was released since can be free
      busy = true;
      for (const i of this.#maybeFree) {
        this.#maybeFree.delete(i);
        look(i);
        if (free.length >= want) break;
      }
    } else {
      for (let k = 0; k < Math.min(SAMPLES, routes.length); k++) {
        look(Math.floor(this.random() * routes.length));
      }
      for (let i = 0; i < routes.length && free.length < want; i++) look(i);
      if (free.length === 0 && busy) {
        this.#fullAt = version;
        this.#maybeFree.clear();
      }
    }
    // least loaded first; between equals, the faster route (built best first)
    free.sort((a, b) => a.load - b.load || a.i - b.i);
    // a free route taken may still have room: looked at again next time
    for (const f of free) if (this.#fullAt === version) this.#maybeFree.add(f.i);
    return { routes: free.slice(0, want).map((f) => routes[f.i]), busy };
  }
}
