// Route selection: cover [0, n_layer) exactly once with contiguous shards, preferring the
// fastest expected route with the fewest hops, skipping overloaded nodes; several routes
// are disjoint in nodes, so independent requests run in parallel on them.

export interface Candidate {
  readonly node: string;
  readonly url: string;
  readonly range: { readonly start: number; readonly end: number };
  /** sessions (reported and just assigned) over the most the node takes; ≥ 1 is full */
  readonly load: number;
  /** the node's decode rate for its range, one session; 0 = unknown */
  readonly tokensPerS: number;
  readonly kvCells: number;
  /** the most cells one session may hold there */
  readonly sessionCells: number;
  /** holds the session already (a repair): keeping it saves rebuilding its range */
  readonly kept?: boolean;
  /** sessions it could still take (the repair reserve counts them) */
  readonly freeSlots?: number;
}

/** One extra hop costs as much as this many ms a token (transport, encode, decode). */
const HOP_MS = 3;
/** Assumed time a token for a node that has not measured itself. */
const UNKNOWN_MS = 50;

/** Expected ms a token through this node at its load; a node kept by a repair costs nothing. */
function cost(c: Candidate): number {
  if (c.kept) return 0;
  const ms = c.tokensPerS > 0 ? 1000 / c.tokensPerS : UNKNOWN_MS;
  return (ms + HOP_MS) * (1 + c.load);
}

/** The cheapest route over the candidates, or undefined when none covers every layer. */
export function bestRoute(cands: readonly Candidate[], nLayer: number): Candidate[] | undefined {
  return disjointRoutes(cands, nLayer, 1)[0];
}

/** Usable candidates of one range, cheapest first (in their given order between equals). */
interface RangeGroup {
  readonly end: number;
  readonly members: { c: Candidate; cost: number }[];
  /** the first member no route has taken yet */
  next: number;
}

/** Up to `count` complete routes with no node in common, best first. */
export function disjointRoutes(cands: readonly Candidate[], nLayer: number, count: number): Candidate[][] {
  // Nodes of one range differ on a route only by their cost, so the cheapest one not taken is
  // the only one of them the best route can use: each route is worked out over the ranges
  // held, not over every node (thousands of nodes hold a few dozen ranges).
  const byRange = new Map<number, RangeGroup>();
  const from: RangeGroup[][] = Array.from({ length: nLayer }, () => []);
  for (const c of cands) {
    const { start, end } = c.range;
    // a kept node's load already counts this session
    if (start < 0 || start >= nLayer || end > nLayer || end <= start || (c.load >= 1 && !c.kept)) continue;
    const key = start * 65_536 + end;
    let g = byRange.get(key);
    if (!g) {
      byRange.set(key, g = { end, members: [], next: 0 });
      from[start].push(g);
    }
    g.members.push({ c, cost: cost(c) });
  }
  // stable: equals keep their order
  for (const g of byRange.values()) g.members.sort((a, b) => a.cost - b.cost);
  const routes: Candidate[][] = [];
  const best: Array<{ cost: number; hops: RangeGroup[] } | undefined> = new Array(nLayer + 1);
  while (routes.length < count) {
    // best[l]: cheapest way to cover [0, l)
    best.fill(undefined);
    best[0] = { cost: 0, hops: [] };
    for (let l = 0; l < nLayer; l++) {
      const here = best[l];
      if (!here) continue;
      for (const g of from[l]) {
        const head = g.members[g.next];
        if (!head) continue;
        const total = here.cost + head.cost;
        const there = best[g.end];
        if (
          !there || total < there.cost || (total === there.cost && here.hops.length + 1 < there.hops.length)
        ) {
          best[g.end] = { cost: total, hops: [...here.hops, g] };
        }
      }
    }
    const hops = best[nLayer]?.hops;
    if (!hops) break;
    routes.push(hops.map((g) => g.members[g.next++].c));
  }
  return routes;
}

/**
 * Why no route came back: complete routes exist but every one has a full node ("busy": wait
 * and ask again), or the admitted, live nodes cover no route at all ("none").
 */
export function noRouteReason(cands: readonly Candidate[], nLayer: number): "busy" | "none" {
  return bestRoute(cands.map((c) => ({ ...c, load: 0 })), nLayer) ? "busy" : "none";
}
