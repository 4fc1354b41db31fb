// Placement: which layers each node that asked ("--layers auto") should hold. The network must
// cover every layer; a route should take as few hops as the nodes' memory caps allow, and the
// layers of a route are shared by measured speed, so no node is its bottleneck (a node twice as
// fast gets about twice the layers). Nodes beyond the first route make more routes, and those
// too few for a route of their own double the slowest ranges. The plan moves as little as it
// can: assignments that still cover the model stay where they are.

export interface Participant {
  readonly node: string;
  /** layers a second for one session (its decode rate × its range's layers); 0: not measured */
  readonly layerRate: number;
  /** the range it holds now, if any */
  readonly current?: Span;
}

export interface Span {
  readonly start: number;
  readonly end: number;
}

export interface PlacementModel {
  readonly nLayer: number;
  /** whether `node` can hold [start, end) under its cap (weights, KV, compute) */
  readonly fits: (node: string, span: Span) => boolean;
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
  participants: readonly Participant[],
  fixed: readonly Span[] = [],
): Placement {
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
 * The fewest participants that can cover `span` in a chain, and its split by speed; undefined
 * when all of them together cannot.
 */
function bestChain(
  model: PlacementModel,
  participants: readonly Participant[],
  span: Span,
): Map<string, Span> | undefined {
  const reach = (p: Participant) =>
    longestFrom(model, p.node, span.start + 1 < span.end ? span.start + 1 : span.start, span.end);
  // the roomiest first: fewest hops; faster first among equals
  const byRoom = [...participants].sort((a, b) => reach(b) - reach(a) || rate(b) - rate(a));
  for (let k = 1; k <= byRoom.length; k++) {
    const chosen = byRoom.slice(0, k);
    // the roomiest at the ends, where the embeddings and the output head add to a range
    const orders = [chosen, [...chosen.slice(1), chosen[0]], [...chosen].reverse()];
    for (const order of orders) {
      const split = splitBySpeed(model, order, span);
      if (split) return split;
    }
  }
  return undefined;
}

const rate = (p: Participant) => (p.layerRate > 0 ? p.layerRate : 1);

/** The longest range from `start` (at most to `end`) that fits the node. */
function longestFrom(model: PlacementModel, node: string, start: number, end: number): number {
  let n = 0;
  while (start + n < end && model.fits(node, { start, end: start + n + 1 })) n++;
  return n;
}

/**
 * Shares `span` over the chain in order: each node's share proportional to its speed among the
 * nodes still to come, cut to what fits where it starts; undefined when the chain falls short.
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
    // those after it must be able to take what it leaves
    const want = i === chain.length - 1
      ? left
      : Math.max(1, Math.round(left * rate(chain[i]) / rest.reduce((s, p) => s + rate(p), 0)));
    const n = Math.min(room, want, left - (chain.length - 1 - i));
    if (n < 1) return undefined;
    out.set(chain[i].node, { start, end: start + n });
    start += n;
  }
  return start === span.end ? out : undefined;
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
    return on.length ? on.reduce((sum, q) => sum + rate(q), 0) : hosts(s);
  };
  const fitting = unique.filter((s) => model.fits(p.node, s));
  fitting.sort((a, b) => (b.end - b.start) / speed(b) - (a.end - a.start) / speed(a));
  return fitting[0];
}

/** The time per token of a route's slowest stage (for comparing plans), in seconds. */
export function bottleneck(chain: ReadonlyArray<{ span: Span; layerRate: number }>): number {
  return Math.max(...chain.map((c) => (c.span.end - c.span.start) / (c.layerRate > 0 ? c.layerRate : 1)));
}
