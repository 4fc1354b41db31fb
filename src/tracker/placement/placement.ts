// Placement: which layers each node that asked ("--layers auto") should hold. The network must
// cover every layer; a route should take as few hops as the nodes' memory caps allow, and the
// work of a route is shared by measured speed, so no node is its bottleneck (a node twice as
// fast gets about twice the work). Work is what a decode step reads (`decode-work.ts`): the
// last range's output head counts, so the range that carries it gets fewer layers. Nodes
// beyond the first route make more routes, and those too few for a route of their own double
// the slowest ranges. The plan moves as little as it can: assignments that still cover the
// model stay where they are.
import type { Span } from "./decode-work.ts";
import { counter, runAll, type Steps } from "../steps.ts";

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
  return runAll(planSteps(model, measured, fixed));
}

/** `plan`, yielding now and then (steps.ts): over thousands of nodes it takes a while. */
export function* planSteps(
  model: PlacementModel,
  measured: readonly Participant[],
  fixed: readonly Span[] = [],
): Steps<Placement> {
  const participants = withSpeeds(measured);
  const kept = participants.filter((p) => p.current && model.fits(p.node, p.current));
  const keeps = new Set(kept);
  const others = participants.filter((p) => !keeps.has(p));
  // first, around what is held now: only the others move in
  const around = yield* place(model, others, [...fixed, ...kept.map((p) => p.current!)]);
  if (around) {
    const out = new Map<string, Span | undefined>(kept.map((p) => [p.node, p.current]));
    for (const [node, span] of around) out.set(node, span);
    return out;
  }
  // the holes are too big for the newcomers: nodes that only double a range move in too
  const spare = spares(kept);
  if (spare.length > 0) {
    const spared = new Set(spare);
    const stay = kept.filter((p) => !spared.has(p));
    const moved = yield* place(model, [...spare, ...others], [...fixed, ...stay.map((p) => p.current!)]);
    if (moved) {
      const out = new Map<string, Span | undefined>(stay.map((p) => [p.node, p.current]));
      for (const [node, span] of moved) out.set(node, span);
      return out;
    }
  }
  // still not: everyone placed afresh, if that covers the model
  const afresh = (yield* place(model, participants, fixed, true))!;
  const spans = (pl: Placement) => [...pl.values()].filter((x): x is Span => !!x);
  if (gaps(model.nLayer, [...fixed, ...spans(afresh)]).length === 0) return afresh;
  // nothing covers it yet: what is held stays, the others take what they can of the holes
  const out = new Map<string, Span | undefined>(kept.map((p) => [p.node, p.current]));
  for (
    const [node, span] of (yield* place(model, others, [...fixed, ...kept.map((p) => p.current!)], true))!
  ) {
    out.set(node, span);
  }
  return out;
}

/**
 * The kept nodes that only double a range: another node still in place holds all of theirs (of
 * two on one range, the later one is spare). Counted per distinct range, not node against
 * node: a network of thousands holds a few dozen ranges.
 */
function spares(kept: readonly Participant[]): Participant[] {
  const inPlace = new Map<number, { span: Span; n: number }>();
  for (const p of kept) {
    const k = spanKey(p.current!);
    const r = inPlace.get(k);
    if (r) r.n++;
    else inPlace.set(k, { span: p.current!, n: 1 });
  }
  const spare: Participant[] = [];
  for (const p of [...kept].reverse()) {
    const own = spanKey(p.current!);
    for (const [k, r] of inPlace) {
      const others = k === own ? r.n - 1 : r.n;
      if (others > 0 && r.span.start <= p.current!.start && r.span.end >= p.current!.end) {
        spare.push(p);
        inPlace.get(own)!.n--;
        break;
      }
    }
  }
  return spare;
}

/**
 * Places `participants` around the ranges `held` by others: first chains over the holes
 * those leave (undefined if a hole stays open, unless `anyway`), then whole routes, then
 * doubles of the slowest ranges.
 */
function* place(
  model: PlacementModel,
  participants: readonly Participant[],
  held: readonly Span[],
  anyway = false,
): Steps<Map<string, Span | undefined> | undefined> {
  const out = new Map<string, Span | undefined>();
  if (held.length > 0) {
    for (const h of gaps(model.nLayer, held)) {
      const chain = yield* bestChain(model, participants.filter((p) => !out.has(p.node)), h);
      if (!chain && !anyway) return undefined;
      for (const [node, span] of chain ?? []) out.set(node, span);
    }
  }
  const routed = yield* routes(model, participants.filter((p) => !out.has(p.node)));
  for (const [node, span] of routed) out.set(node, span);
  const ranges = new HeldRanges(model.nLayer, [...out.values()], held, participants);
  const tick = counter(64);
  for (const p of participants) {
    if (out.has(p.node)) continue;
    if (tick()) yield;
    // while layers are uncovered, a node too small for a route takes what it can of the first
    // gap: coverage grows as nodes join
    const gap = ranges.firstGap();
    const n = gap ? longestFrom(model, p.node, gap.start, gap.end) : 0;
    const span = n > 0 ? { start: gap!.start, end: gap!.start + n } : ranges.thinnest(model, p.node);
    out.set(p.node, span);
    if (span) ranges.add(span);
  }
  return out;
}

/** One number per span, for maps keyed by range. */
export const spanKey = (s: Span) => s.start * 65_536 + s.end;

/**
 * The ranges placed so far (those of placed participants first, then those held by others),
 * kept up to date as leftover nodes are placed one by one: which layers they cover, and for
 * each range its hosts and the summed speed of the participants there now. Recomputing these
 * per leftover node made a plan over thousands of nodes quadratic.
 */
class HeldRanges {
  readonly #cover: Uint8Array;
  /** per range: the span, its hosts, and the participants now on it (their speeds summed) */
  readonly #stats = new Map<number, { span: Span; hosts: number; on: number; speed: number }>();
  /** ranges in the order a plan lists them: placed participants' first, then others' */
  readonly #placedOrder: number[] = [];
  readonly #heldOrder: number[] = [];
  readonly #placedKeys = new Set<number>();
  /** the participants now on each range (static through a plan) */
  readonly #now = new Map<number, { on: number; speed: number }>();

  constructor(
    nLayer: number,
    placed: ReadonlyArray<Span | undefined>,
    held: readonly Span[],
    participants: readonly Participant[],
  ) {
    this.#cover = new Uint8Array(nLayer);
    for (const q of participants) {
      if (!q.current) continue;
      const k = spanKey(q.current);
      const n = this.#now.get(k);
      if (n) {
        n.on++;
        n.speed += q.speed;
      } else this.#now.set(k, { on: 1, speed: q.speed });
    }
    for (const s of placed) if (s) this.add(s);
    for (const s of held) this.#count(s, false);
  }

  /** A leftover node placed on `span`. */
  add(span: Span): void {
    this.#count(span, true);
  }

  #count(span: Span, placed: boolean): void {
    this.#cover.fill(1, span.start, span.end);
    const k = spanKey(span);
    const stat = this.#stats.get(k);
    if (stat) stat.hosts++;
    else {
      const now = this.#now.get(k);
      this.#stats.set(k, { span, hosts: 1, on: now?.on ?? 0, speed: now?.speed ?? 0 });
    }
    if (placed && !this.#placedKeys.has(k)) {
      this.#placedKeys.add(k);
      this.#placedOrder.push(k);
    } else if (!placed && !stat) this.#heldOrder.push(k);
  }

  /** The first run of layers no range covers. */
  firstGap(): Span | undefined {
    const start = this.#cover.indexOf(0);
    if (start < 0) return undefined;
    let end = start;
    while (end < this.#cover.length && this.#cover[end] === 0) end++;
    return { start, end };
  }

  /**
   * For a node too small for a route of its own: the placed range with the most time per
   * host (its work over the summed speed of the participants there, else over its hosts)
   * that fits it; undefined if none fits.
   */
  thinnest(model: PlacementModel, node: string): Span | undefined {
    const order = [...this.#placedOrder, ...this.#heldOrder.filter((k) => !this.#placedKeys.has(k))];
    const fitting = order.map((k) => this.#stats.get(k)!).filter((u) => model.fits(node, u.span))
      .map((u) => ({ span: u.span, time: model.work(u.span) / (u.on ? u.speed : u.hosts) }));
    fitting.sort((a, b) => b.time - a.time);
    return fitting[0]?.span;
  }
}

/** Disjoint routes over [0, nLayer) from these participants, each with as few hops as fit. */
function* routes(model: PlacementModel, participants: readonly Participant[]): Steps<Map<string, Span>> {
  const out = new Map<string, Span>();
  const whole = { start: 0, end: model.nLayer };
  // a chain takes the first of those sorted, so what is left stays sorted: sorted once, not
  // once a route (that made a plan over thousands of nodes quadratic)
  const sorted = yield* byRoom(model, participants, whole);
  const tick = counter(16);
  for (let at = 0; at < sorted.length;) {
    if (tick()) yield;
    const chain = chainFrom(model, sorted, at, whole);
    if (!chain) return out;
    for (const [node, span] of chain) out.set(node, span);
    at += chain.size;
  }
  return out;
}

/**
 * The fewest participants that can cover `span` in a chain, in the order and split with the
 * least-loaded slowest stage; undefined when all of them together cannot.
 */
function* bestChain(
  model: PlacementModel,
  participants: readonly Participant[],
  span: Span,
): Steps<Map<string, Span> | undefined> {
  return chainFrom(model, yield* byRoom(model, participants, span), 0, span);
}

/** The roomiest for `span` first (fewest hops), faster first among equals. */
function* byRoom(
  model: PlacementModel,
  participants: readonly Participant[],
  span: Span,
): Steps<Participant[]> {
  const from = span.start + 1 < span.end ? span.start + 1 : span.start;
  const reach = new Map<Participant, number>();
  const tick = counter(256);
  for (const p of participants) {
    if (tick()) yield;
    reach.set(p, longestFrom(model, p.node, from, span.end));
  }
  return [...participants].sort((a, b) => reach.get(b)! - reach.get(a)! || b.speed - a.speed);
}

/** The shortest run of `sorted` from `at` that chains over `span` (as `bestChain`). */
function chainFrom(
  model: PlacementModel,
  sorted: readonly Participant[],
  at: number,
  span: Span,
): Map<string, Span> | undefined {
  // a chain longer than the span cannot give each of its nodes a layer
  const longest = Math.min(sorted.length - at, span.end - span.start);
  for (let k = 1; k <= longest; k++) {
    const chosen = sorted.slice(at, at + k);
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

/** The time per token of a route's slowest stage (for comparing plans), in seconds. */
export function bottleneck(
  model: Pick<PlacementModel, "work">,
  chain: ReadonlyArray<{ span: Span; speed: number }>,
): number {
  return Math.max(...chain.map((c) => model.work(c.span) / (c.speed > 0 ? c.speed : 1)));
}
