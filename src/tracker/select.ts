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
  // the candidates by their first layer, in their order: each is looked at once
  const from: Candidate[][] = Array.from({ length: nLayer }, () => []);
  for (const c of cands) if (c.range.start >= 0 && c.range.start < nLayer) from[c.range.start].push(c);
  // best[l]: cheapest way to cover [0, l)
  const best: Array<{ cost: number; hops: Candidate[] } | undefined> = new Array(nLayer + 1).fill(undefined);
  best[0] = { cost: 0, hops: [] };
  for (let l = 0; l < nLayer; l++) {
    const here = best[l];
    if (!here) continue;
    for (const c of from[l]) {
      // a kept node's load already counts this session
      if (c.range.end > nLayer || (c.load >= 1 && !c.kept)) continue;
      const total = here.cost + cost(c);
      const there = best[c.range.end];
      if (
        !there || total < there.cost || (total === there.cost && here.hops.length + 1 < there.hops.length)
      ) {
        best[c.range.end] = { cost: total, hops: [...here.hops, c] };
      }
    }
  }
  return best[nLayer]?.hops;
}

/** Up to `count` complete routes with no node in common, best first. */
export function disjointRoutes(cands: readonly Candidate[], nLayer: number, count: number): Candidate[][] {
  const routes: Candidate[][] = [];
  let left = [...cands];
  while (routes.length < count) {
    const r = bestRoute(left, nLayer);
    if (!r) break;
    routes.push(r);
    const used = new Set(r.map((c) => c.node));
    left = left.filter((c) => !used.has(c.node));
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
