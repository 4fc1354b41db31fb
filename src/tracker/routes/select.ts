// Route selection: cover [0, n_layer) exactly once with contiguous shards, preferring the
// fastest expected route with the fewest hops, skipping overloaded nodes; several routes
// are disjoint in nodes, so independent requests run in parallel on them.
import { counter, runAll, type Steps } from "../steps.ts";

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
  /** holds KV of the session's prompt prefix: a route through it computes less */
  readonly preferred?: boolean;
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
  readonly start: number;
  readonly end: number;
  readonly members: { c: Candidate; cost: number }[];
}

/** Up to `count` complete routes with no node in common, best first. */
export function disjointRoutes(cands: readonly Candidate[], nLayer: number, count: number): Candidate[][] {
  return runAll(disjointRouteSteps(cands, nLayer, count));
}

/** `disjointRoutes`, yielding now and then (steps.ts): the route pool is all of them. */
export function* disjointRouteSteps(
  cands: readonly Candidate[],
  nLayer: number,
  count: number,
): Steps<Candidate[][]> {
  // Nodes of one range differ on a route only by their cost, so the cheapest one not taken is
  // the only one of them the best route can use: each route is worked out over the ranges
  // held, not over every node (thousands of nodes hold a few dozen ranges).
  const byRange = new Map<number, RangeGroup>();
  for (const c of cands) {
    const { start, end } = c.range;
    // a kept node's load already counts this session
    if (start < 0 || start >= nLayer || end > nLayer || end <= start || (c.load >= 1 && !c.kept)) continue;
    const key = start * 65_536 + end;
    let g = byRange.get(key);
    if (!g) byRange.set(key, g = { start, end, members: [] });
    g.members.push({ c, cost: cost(c) });
  }
  // stable: equals keep their order
  const groups = [...byRange.values()];
  for (const g of groups) g.members.sort((a, b) => a.cost - b.cost);
  // Flat arrays, not a list of hops per layer: a pool of 2,000 routes over 10,000 nodes
  // relaxes 400,000 (layer, range) pairs, which took 50-100 ms with objects and blocked the
  // tracker's event loop (docs/benchmarks.md). Groups by start layer, in the order first seen.
  const byStart = groups.map((_, i) => i).sort((a, b) => groups[a].start - groups[b].start || a - b);
  const fromAt = new Int32Array(nLayer + 1);
  for (const g of groups) fromAt[g.start + 1]++;
  for (let l = 0; l < nLayer; l++) fromAt[l + 1] += fromAt[l];
  const gEnd = Int32Array.from(groups, (g) => g.end);
  const next = new Int32Array(groups.length);
  /** the cost of each group's first member not taken yet (Infinity: none left) */
  const headCost = Float64Array.from(groups, (g) => g.members[0].cost);
  // the cheapest way to cover [0, l) found so far: its cost, its hops, and its last hop (the
  // way to [0, that hop's start) is that layer's own best)
  const bestCost = new Float64Array(nLayer + 1);
  const bestHops = new Int32Array(nLayer + 1);
  const lastHop = new Int32Array(nLayer + 1);
  const routes: Candidate[][] = [];
  const tick = counter(32);
  while (routes.length < count) {
    if (tick()) yield;
    bestCost.fill(Infinity);
    bestCost[0] = 0;
    bestHops[0] = 0;
    for (let l = 0; l < nLayer; l++) {
      const here = bestCost[l];
      if (here === Infinity) continue;
      const hops = bestHops[l] + 1;
      for (let k = fromAt[l]; k < fromAt[l + 1]; k++) {
        const gi = byStart[k];
        const head = headCost[gi];
        if (head === Infinity) continue;
        const total = here + head;
        const end = gEnd[gi];
        const there = bestCost[end];
        if (total < there || (total === there && hops < bestHops[end])) {
          bestCost[end] = total;
          bestHops[end] = hops;
          lastHop[end] = gi;
        }
      }
    }
    if (bestCost[nLayer] === Infinity) break;
    const route: Candidate[] = [];
    for (let l = nLayer; l > 0; l = groups[lastHop[l]].start) {
      const gi = lastHop[l];
      const members = groups[gi].members;
      route.push(members[next[gi]++].c);
      headCost[gi] = next[gi] < members.length ? members[next[gi]].cost : Infinity;
    }
    routes.push(route.reverse());
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
