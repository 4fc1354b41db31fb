// Placement: which layers each node that asked ("--layers auto") should hold. The network must
// cover every layer; a route should take as few hops as the nodes' memory caps allow, and the
// work of a route is shared by measured speed, so no node is its bottleneck (a node twice as
// fast gets about twice the work). Work is what a decode step reads (`decode-work.ts`): the
// last range's output head counts, so the range that carries it gets fewer layers. Nodes
// beyond the first route make more routes, and those too few for a route of their own double
// the slowest ranges. The plan moves as little as it can: assignments that still cover the
// model stay where they are.
import type { Span } from "./decode-work.ts";

export type { Span };

export interface Participant {
  readonly node: string;
  /** work a second for one session (its decode rate × its range's work); 0: not measured */
  readonly speed: number;
  /** the range it holds now, if any */
  readonly current?: Span;
}

export interface PlacementModel {
  readonly nLayer: number;
  /** whether `node` can hold [start, end) under its cap (weights, KV, compute) */
  readonly fits: (node: string, span: Span) => boolean;
  /** what one decode step through [start, end) costs, in the units speeds are in */
  readonly work: (span: Span) => number;
}

/** Each participant's range; a node left out (`undefined`) fits nowhere useful yet. */
export type Placement = ReadonlyMap<string, Span | undefined>;

/** Where the nodes' ranges leave layers uncovered (none: a route exists over them). */
export function gaps(nLayer: number, spans: readonly Span[]): Span[] {
  const covered = new Uint8Array(nLayer);
  for (const s of spans) covered.fill(1, s.start, s.end);
  const out: Span[] = [];
  for (let l = 0; l < nLayer; l++) {
    if (covered[l]) continue;
    const start = l;
    while (l < nLayer && !covered[l]) l++;
    out.push({ start, end: l });
  }
  return out;
}

/**
 * The plan. Nodes whose current ranges still cover the model keep them (alone, a fixed node's
 * range counts too); a newcomer joins where it adds a route or doubles the slowest range.
 * When coverage is broken, every participant is placed afresh.
 */
export function plan(
  model: PlacementModel,
  measured: readonly Participant[],
  fixed: readonly Span[] = [],
): Placement {
  const participants = withSpeeds(measured);
  const kept = participants.filter((p) => p.current && model.fits(p.node, p.current));
  const others = participants.filter((p) => !kept.includes(p));
  // first, around what is held now: only the others move in
  const around = place(model, others, [...fixed, ...kept.map((p) => p.current!)]);
  if (around) {
    const out = new Map<string, Span | undefined>(kept.map((p) => [p.node, p.current]));
    for (const [node, span] of around) out.set(node, span);
    return out;
  }
  // the holes are too big for the newcomers: nodes that only double a range move in too
  const spare: Participant[] = [];
  for (const p of [...kept].reverse()) {
    // spare: another node still in place holds all of its range (the later one moves)
    const cover = kept.find((q) =>
      q !== p && !spare.includes(q) && q.current!.start <= p.current!.start &&
      q.current!.end >= p.current!.end
    );
    if (cover) spare.push(p);
  }
  if (spare.length > 0) {
    const stay = kept.filter((p) => !spare.includes(p));
    const moved = place(model, [...spare, ...others], [...fixed, ...stay.map((p) => p.current!)]);
    if (moved) {
      const out = new Map<string, Span | undefined>(stay.map((p) => [p.node, p.current]));
      for (const [node, span] of moved) out.set(node, span);
      return out;
    }
  }
  // still not: everyone placed afresh, if that covers the model
  const afresh = place(model, participants, fixed, true)!;
  const spans = (pl: Placement) => [...pl.values()].filter((x): x is Span => !!x);
  if (gaps(model.nLayer, [...fixed, ...spans(afresh)]).length === 0) return afresh;
  // nothing covers it yet: what is held stays, the others take what they can of the holes
  const out = new Map<string, Span | undefined>(kept.map((p) => [p.node, p.current]));
  for (const [node, span] of place(model, others, [...fixed, ...kept.map((p) => p.current!)], true)!) {
    out.set(node, span);
  }
  return out;
}

/**
 * Places `participants` around the ranges `held` by others: first chains over the holes
 * those leave (undefined if a hole stays open, unless `anyway`), then whole routes, then
 * doubles of the slowest ranges.
 */
function place(
  model: PlacementModel,
  participants: readonly Participant[],
  held: readonly Span[],
  anyway = false,
): Map<string, Span | undefined> | undefined {
  const out = new Map<string, Span | undefined>();
  if (held.length > 0) {
    for (const h of gaps(model.nLayer, held)) {
      const chain = bestChain(model, participants.filter((p) => !out.has(p.node)), h);
      if (!chain && !anyway) return undefined;
      for (const [node, span] of chain ?? []) out.set(node, span);
    }
  }
  for (const [node, span] of routes(model, participants.filter((p) => !out.has(p.node)))) out.set(node, span);
  for (const p of participants) {
    if (out.has(p.node)) continue;
    const spans = [...out.values(), ...held].filter((s): s is Span => !!s);
    // while layers are uncovered, a node too small for a route takes what it can of the first
    // gap: coverage grows as nodes join
    const gap = gaps(model.nLayer, spans)[0];
    const n = gap ? longestFrom(model, p.node, gap.start, gap.end) : 0;
    out.set(
      p.node,
      n > 0 ? { start: gap.start, end: gap.start + n } : thinnest(model, p, spans, participants),
    );
  }
  return out;
}

/** Disjoint routes over [0, nLayer) from these participants, each with as few hops as fit. */
function routes(model: PlacementModel, participants: readonly Participant[]): Map<string, Span> {
  const out = new Map<string, Span>();
  let left = [...participants];
  for (;;) {
    const chain = bestChain(model, left, { start: 0, end: model.nLayer });
    if (!chain) return out;
    for (const [node, span] of chain) out.set(node, span);
    left = left.filter((p) => !out.has(p.node));
  }
}

/**
 * The fewest participants that can cover `span` in a chain, in the order and split with the
 * least-loaded slowest stage; undefined when all of them together cannot.
 */
function bestChain(
  model: PlacementModel,
  participants: readonly Participant[],
  span: Span,
): Map<string, Span> | undefined {
  const reach = (p: Participant) =>
    longestFrom(model, p.node, span.start + 1 < span.end ? span.start + 1 : span.start, span.end);
  // the roomiest first: fewest hops; faster first among equals
  const byRoom = [...participants].sort((a, b) => reach(b) - reach(a) || b.speed - a.speed);
  for (let k = 1; k <= byRoom.length; k++) {
    const chosen = byRoom.slice(0, k);
    let best: { split: Map<string, Span>; cost: number } | undefined;
    for (const order of orders(chosen)) {
      const split = splitBySpeed(model, order, span);
      if (!split) continue;
      const cost = bottleneck(model, order.map((p) => ({ span: split.get(p.node)!, speed: p.speed })));
      if (!best || cost < best.cost) best = { split, cost };
    }
    if (best) return best.split;
  }
  return undefined;
}

/**
 * The orders a chain is tried in: every one for a few nodes; for more, the roomiest at either
 * end (where the embeddings and the output head add to a range) or reversed.
 */
function orders(chosen: readonly Participant[]): Participant[][] {
  if (chosen.length <= 3) return permutations(chosen);
  return [[...chosen], [...chosen.slice(1), chosen[0]], [...chosen].reverse()];
}

function permutations<T>(xs: readonly T[]): T[][] {
  if (xs.length <= 1) return [[...xs]];
  return xs.flatMap((x, i) =>
    permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((rest) => [x, ...rest])
  );
}

/** Unmeasured nodes count as the measured ones' mean (all unmeasured: all alike). */
function withSpeeds(participants: readonly Participant[]): Participant[] {
  const known = participants.filter((p) => p.speed > 0);
  const mean = known.length ? known.reduce((s, p) => s + p.speed, 0) / known.length : 1;
  return participants.map((p) => (p.speed > 0 ? p : { ...p, speed: mean }));
}

/** The longest range from `start` (at most to `end`) that fits the node. */
function longestFrom(model: PlacementModel, node: string, start: number, end: number): number {
  let n = 0;
  while (start + n < end && model.fits(node, { start, end: start + n + 1 })) n++;
  return n;
}

/**
 * Shares `span` over the chain in order: each node's share of the work proportional to its
 * speed among the nodes still to come, cut to what fits where it starts; undefined when the
 * chain falls short.
 */
function splitBySpeed(
  model: PlacementModel,
  chain: readonly Participant[],
  span: Span,
): Map<string, Span> | undefined {
  const out = new Map<string, Span>();
  let start = span.start;
  for (let i = 0; i < chain.length; i++) {
    const rest = chain.slice(i);
    const left = span.end - start;
    const room = longestFrom(model, chain[i].node, start, span.end);
    if (room === 0) return undefined;
    // those after it must be able to take what it leaves: at least a layer each, and no
    // more than they can hold
    const most = Math.min(room, left - (chain.length - 1 - i));
    if (most < 1) return undefined;
    let n = most;
    if (i < chain.length - 1) {
      const after = chain.slice(i + 1);
      const least = leastLeaving(model, after, start, most, span.end);
      if (least === undefined) return undefined;
      const share = model.work({ start, end: span.end }) * chain[i].speed /
        rest.reduce((s, p) => s + p.speed, 0);
      const off = (k: number) => Math.abs(model.work({ start, end: start + k }) - share);
      for (let k = least; k <= most; k++) if (off(k) < off(n)) n = k;
    }
    out.set(chain[i].node, { start, end: start + n });
    start += n;
  }
  return start === span.end ? out : undefined;
}

/**
 * The fewest layers (1 to `most`) a node starting at `start` can take so that `after`, in
 * order, can still cover the rest to `end`; undefined when even `most` leaves too much.
 * Taking more never leaves more to cover, so a binary search finds it.
 */
function leastLeaving(
  model: PlacementModel,
  after: readonly Participant[],
  start: number,
  most: number,
  end: number,
): number | undefined {
  const covers = (from: number) => {
    for (const p of after) from += longestFrom(model, p.node, from, end);
    return from >= end;
  };
  if (!covers(start + most)) return undefined;
  let lo = 1, hi = most;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (covers(start + mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * For a node too small for a route of its own: the placed range with the most time per
 * host (layers over the summed speed of its hosts) that fits it; undefined if none fits.
 */
function thinnest(
  model: PlacementModel,
  p: Participant,
  spans: ReadonlyArray<Span | undefined>,
  participants: readonly Participant[],
): Span | undefined {
  const held = spans.filter((s): s is Span => !!s);
  const key = (s: Span) => `${s.start}:${s.end}`;
  const unique = [...new Map(held.map((s) => [key(s), s])).values()];
  const hosts = (s: Span) => held.filter((h) => key(h) === key(s)).length;
  const speed = (s: Span) => {
    const on = participants.filter((q) => q.current && key(q.current) === key(s));
    return on.length ? on.reduce((sum, q) => sum + q.speed, 0) : hosts(s);
  };
  const fitting = unique.filter((s) => model.fits(p.node, s));
  fitting.sort((a, b) => model.work(b) / speed(b) - model.work(a) / speed(a));
  return fitting[0];
}

/** The time per token of a route's slowest stage (for comparing plans), in seconds. */
export function bottleneck(
  model: Pick<PlacementModel, "work">,
  chain: ReadonlyArray<{ span: Span; speed: number }>,
): number {
  return Math.max(...chain.map((c) => model.work(c.span) / (c.speed > 0 ? c.speed : 1)));
}
