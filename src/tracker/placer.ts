// The tracker's side of placement: the nodes that asked where to go (`--layers auto`), what
// their engines can hold, and the plan over them (`placement.ts`), kept until the network
// changes. Nodes with ranges of their own count as fixed coverage.
import { memoryMisfit, type RangeMemory } from "../engine/memory-fit.ts";
import type { PlaceRequest } from "../gen/strata/tracker/v1/tracker_pb.ts";
import { planAtCuts } from "./cut-placement.ts";
import { decodeWork } from "./decode-work.ts";
import {
  bottleneck,
  type Participant,
  type Placement,
  type PlacementModel,
  type Span,
  spanKey,
} from "./placement.ts";
import { rangeMemoryOf } from "./range-memory.ts";
import type { TrackedModel } from "./registration.ts";
import { runAll, type Slicer, type Steps } from "./steps.ts";
import type { NodeRecord, PlanEntry } from "./storage.ts";

/** A node's ask: the request, when it was made, the order it was heard in, and the answers
 *  to "does this range fit it" worked out so far (they never change for one ask). */
interface Ask {
  readonly req: PlaceRequest;
  readonly at: number;
  readonly seq: number;
  readonly fits: Map<number, boolean>;
}

/** What the placer sees of the registry. */
export interface PlacedView {
  readonly records: () => Iterable<NodeRecord>;
  readonly record: (node: string) => NodeRecord | undefined;
  readonly isLive: (node: string, now: number) => boolean;
}

/** Without a new ask, the plan is looked at again at most this often: a heartbeat reads the
 *  plan in force, and a pass over thousands of nodes per beat would cost more than the beats
 *  themselves. Registrations, verdicts and lapsed leases are seen within it. */
const PLAN_REFRESH_MS = 1000;

/** Asks coming together are placed together: the plan is looked at again at most this often
 *  for new asks (a plan is a pass over every participant; one per ask would make a network's
 *  joining quadratic). An ask that finds a plan this fresh waits for the next (`replan`). */
export const PLAN_BATCH_MS = 100;
/** ... and, in a network so large that a plan takes a while, at most this share of the time is
 *  spent planning: the batches grow instead. */
const PLAN_SHARE = 0.25;

/** A plan this much faster (slowest stage, measured speeds) than the one in force replaces it. */
const REBALANCE_GAIN = 1.25;
/** ... but not sooner than this after the last change: moving has a cost too. A plan from
 *  scratch is also worked out at most this often: under churn the network changes every
 *  second, and at 100,000 participants one costs over half a second of the leader's time. */
const REBALANCE_QUIET_MS = 30_000;

/**
 * The tracker's placer. With replicas, one of them leads: its plan is the one in force, and it
 * publishes each change (`published`); the others keep the asks they hear of (so any of them
 * can take over with everything known) and answer from the plan they were given (`adopt`).
 */
export class Placer {
  /** asks by node: the request, when it was made, and the order it was heard in */
  readonly #asks = new Map<string, Ask>();
  #heard = 0;
  /** every ask heard up to this one is in the plan */
  #planned = 0;
  // changed in place: a follower takes thousands of lines a second, one at a time
  #plan = new Map<string, Span | undefined>();
  /** whether this plan is the one in force (one tracker, or the replica that leads) */
  #leading = true;
  /** what was last published (leader) or adopted (follower): node → range and ask time */
  readonly #shared = new Map<string, PlanEntry>();
  /** asks forgotten by the leader since it last published */
  readonly #gone: PlanEntry[] = [];
  /** what the last plan was made from (`#refresh`) */
  #shape: ReadonlyArray<string | number> = [];
  /** nodes whose line may differ from what was last published: a new ask, or a new range */
  readonly #unpublished = new Set<string>();
  #changedAt = 0;
  /** when a plan from scratch was last weighed against the plan in force */
  #weighedAt = -Infinity;
  readonly #planning: PlacementModel;
  /** what a range needs, by engine budget then span */
  readonly #needs = new Map<string, Map<number, RangeMemory>>();
  // when the plan was last looked at, and whether an ask came or went since
  #refreshedAt = -Infinity;
  /** how long the last plan took (ms) */
  #planMs = 0;
  #asksChanged = true;
  /** a plan being worked out in slices: until it lands, answers come from the plan in force */
  #working = false;

  constructor(
    private readonly model: TrackedModel,
    private readonly view: PlacedView,
    private readonly leaseMs: number,
    private readonly running: {
      /** plans run in slices through it (the tracker's event loop); without it, at once */
      readonly slicer?: Slicer;
      /** a plan worked out in slices has landed */
      readonly onPlanned?: () => void;
    } = {},
  ) {
    this.#planning = {
      nLayer: model.nLayer,
      fits: (n, s) => this.#fits(n, s),
      work: decodeWork(model.manifest),
    };
  }

  /** A node's ask for a range, taken here or by another replica; false if it was known
   *  already. The plan answers it once a plan has been made since (`answered`, `placeOf`). */
  heard(req: PlaceRequest, at: number): boolean {
    const had = this.#asks.get(req.node);
    // the same ask read again (replicas re-read the last moments' rows), or an older one
    if (had && had.at >= at) return false;
    this.#asks.set(req.node, { req, at, seq: ++this.#heard, fits: new Map() });
    this.#unpublished.add(req.node);
    this.#asksChanged = true;
    return true;
  }

  /** When the ask this plan answered was made (-Infinity: not placed by it yet). */
  answered(node: string): number {
    if (!this.#leading) return this.#shared.get(node)?.askedAt ?? -Infinity;
    const ask = this.#asks.get(node);
    return ask && ask.seq <= this.#planned ? ask.at : -Infinity;
  }

  /** Looks at the plan again now, whatever the batching says (the leader's batch timer). */
  replan(now: number): void {
    this.#refresh(now, true);
  }

  /** Leads (its plan is in force) or follows (answers from the plan adopted). */
  lead(leading: boolean, now: number): void {
    if (leading === this.#leading) return;
    this.#leading = leading;
    // a new leader starts from the plan in force, and looks at it again now; a plan from
    // scratch waits the quiet time as if the plan had just changed: a change of leader is no
    // reason to move the network
    this.#asksChanged = true;
    if (leading) {
      this.#changedAt = now;
      // what it was told as a follower may lag its own asks: every line is looked at once
      for (const node of this.#asks.keys()) this.#unpublished.add(node);
    }
  }

  /** How long asks wait to be placed together now. */
  get batchMs(): number {
    return Math.max(PLAN_BATCH_MS, this.#planMs / PLAN_SHARE);
  }

  get leading(): boolean {
    return this.#leading;
  }

  /** The leader's changes since the last call, for the other replicas. */
  published(now: number): PlanEntry[] {
    if (!this.#leading) return [];
    this.#refresh(now);
    const out: PlanEntry[] = this.#gone.splice(0);
    // only the lines that may have changed: a pass over every ask, several times a second,
    // cost the leader tens of milliseconds each at 100,000 nodes
    for (const node of this.#unpublished) {
      const ask = this.#asks.get(node);
      // gone: `forget` told the others
      if (!ask) {
        this.#unpublished.delete(node);
        continue;
      }
      // an ask heard since the plan was made is placed by the next one
      if (ask.seq > this.#planned) continue;
      this.#unpublished.delete(node);
      const range = this.#plan.get(node);
      const was = this.#shared.get(node);
      if (was && was.askedAt === ask.at && sameSpan(was.range, range)) continue;
      const e = { node, range, askedAt: ask.at };
      this.#shared.set(node, e);
      out.push(e);
    }
    // an ask nothing fits, from a node that holds nothing: refused, as one tracker refuses it
    const refused = out.filter((e) => !e.range && this.#asks.has(e.node));
    if (refused.length > 0) {
      for (const e of refused) {
        if (this.view.record(e.node)) continue;
        this.#asks.delete(e.node);
        this.#shared.delete(e.node);
        this.#plan.delete(e.node);
        this.#asksChanged = true;
      }
    }
    return out;
  }

  /** A follower takes the leader's lines. */
  adopt(entries: readonly PlanEntry[]): void {
    if (entries.length === 0) return;
    for (const e of entries) {
      const was = this.#shared.get(e.node);
      if (was && (was.askedAt > e.askedAt || (was.askedAt === e.askedAt && sameSpan(was.range, e.range)))) {
        continue;
      }
      this.#shared.set(e.node, e);
      if (!this.#leading) this.#plan.set(e.node, e.range);
      // another replica's line while this one leads: its own plan is said again
      else this.#unpublished.add(e.node);
    }
  }

  /** Whether the tracker places this node. */
  places(node: string): boolean {
    return this.#asks.has(node);
  }

  forget(node: string): void {
    const ask = this.#asks.get(node);
    if (ask) {
      this.#asks.delete(node);
      this.#asksChanged = true;
      // the other replicas learn the ask was answered (no range) and is gone
      if (this.#leading) this.#gone.push({ node, range: undefined, askedAt: ask.at });
    }
    this.#shared.delete(node);
    if (!this.#leading) this.#plan.delete(node);
  }

  /** The node's range in the plan now (recomputed when who is present has changed). */
  placeOf(node: string, now: number): Span | undefined {
    this.#refresh(now);
    return this.#plan.get(node);
  }

  /** The plan in force (for the network page and tests). */
  plan(now: number): Placement {
    this.#refresh(now);
    return this.#plan;
  }

  #fits(node: string, span: Span): boolean {
    const ask = this.#asks.get(node);
    if (!ask) return false;
    // a plan asks the same few questions many times over; an ask's answers never change
    const key = spanKey(span);
    let answer = ask.fits.get(key);
    if (answer === undefined) ask.fits.set(key, answer = this.#fitsAsked(ask.req, span, key));
    return answer;
  }

  #fitsAsked(ask: PlaceRequest, span: Span, key: number): boolean {
    // what a range needs depends on the engine's budget, not on the cap: nodes of a network
    // share a few budgets, and an estimate costs tens of microseconds (100,000 nodes asking
    // ~50 questions each took minutes)
    const budget =
      `${ask.kvCells}/${ask.maxSessions}/${ask.batchTokens}/${ask.batchInvariant}/${ask.flashAttention}`;
    let needs = this.#needs.get(budget);
    if (!needs) this.#needs.set(budget, needs = new Map());
    let need = needs.get(key);
    if (!need) {
      need = rangeMemoryOf(this.model, span, ask.kvCells, {
        maxSequences: ask.maxSessions,
        batchTokens: ask.batchTokens,
        batchInvariant: ask.batchInvariant,
        flashAttention: ask.flashAttention,
      });
      needs.set(key, need);
    }
    return !memoryMisfit(need, Number(ask.memoryCapBytes));
  }

  /** Whether a plan is being worked out in slices now. */
  get working(): boolean {
    return this.#working;
  }

  #refresh(now: number, force = false): void {
    if (!this.#leading || this.#working) return;
    const since = now - this.#refreshedAt;
    if (!force && since < (this.#asksChanged ? this.batchMs : PLAN_REFRESH_MS)) return;
    const started = performance.now();
    this.#asksChanged = false;
    this.#refreshedAt = now;
    const heard = this.#heard;
    const participants: Participant[] = [];
    // what a plan is made from, flat: every participant's node, range and speed (rounded to
    // steps of 2 %), then the fixed ranges; compared with the last one's to skip an unchanged
    // plan without building a key over every node
    const shape: Array<string | number> = [];
    for (const [node, ask] of this.#asks) {
      const live = this.view.isLive(node, now);
      const r = this.view.record(node);
      // neither live nor asking again within a lease of its last ask: not in the plan, and
      // gone for good once it holds no registration either
      if (!live && now - ask.at > this.leaseMs) {
        if (!r) this.#asks.delete(node);
        continue;
      }
      // where the plan sends it (it may still be loading that), else what it holds
      const current = this.#plan.get(node) ?? (r && live ? { start: r.start, end: r.end } : undefined);
      // a node measures its decode rate on the range it holds: as work a second, it compares
      // across ranges
      const speed = r && r.tokensPerS > 0 ? r.tokensPerS * this.#planning.work(r) : 0;
      participants.push({ node, speed, current });
      shape.push(node, current?.start ?? -1, current?.end ?? -1, Math.round(Math.log(speed) * 50));
    }
    const fixed: Span[] = [];
    for (const r of this.view.records()) {
      if (this.#asks.has(r.node) || r.admission !== "admitted" || !this.view.isLive(r.node, now)) continue;
      fixed.push({ start: r.start, end: r.end });
      shape.push(r.start, r.end);
    }
    // the plan is looked at again when who is where changes, when a speed is first measured
    // (or changes by more than rounding), and once the quiet time after a change has passed
    const quiet = now - this.#changedAt > REBALANCE_QUIET_MS && now - this.#weighedAt > REBALANCE_QUIET_MS;
    shape.push(quiet ? 1 : 0);
    if (sameShape(shape, this.#shape)) {
      this.#planned = heard;
      return;
    }
    const steps = this.#planSteps(participants, fixed, quiet, now);
    const shaping = performance.now() - started;
    if (!this.running.slicer) {
      this.#land(runAll(steps), shape, heard, now);
      this.#planMs = performance.now() - started;
      return;
    }
    this.#working = true;
    this.running.slicer(steps, (next, busyMs) => {
      this.#working = false;
      // the lead went elsewhere meanwhile: the new leader's plan is the one in force
      if (!this.#leading) return;
      this.#land(next, shape, heard, now);
      this.#planMs = shaping + busyMs;
      this.running.onPlanned?.();
    }, () => {
      // a plan that fails is a bug; the next look tries again rather than stopping placement
      this.#working = false;
      this.#asksChanged = true;
    });
  }

  /** The plan around who holds what now, or one from scratch when that is enough faster. */
  *#planSteps(participants: Participant[], fixed: Span[], quiet: boolean, now: number): Steps<Placement> {
    const m = this.#planning;
    const cuts = this.model.manifest.cuts;
    const next = yield* planAtCuts(m, participants, fixed, cuts);
    // measured speeds known everywhere: a plan from scratch may be worth the moves
    if (
      participants.length > 1 && participants.every((p) => p.speed > 0) && quiet
    ) {
      this.#weighedAt = now;
      const afresh = yield* planAtCuts(
        m,
        participants.map((p) => ({ ...p, current: undefined })),
        fixed,
        cuts,
      );
      if (cost(m, participants, next) > REBALANCE_GAIN * cost(m, participants, afresh)) return afresh;
    }
    return next;
  }

  /** A plan made from `shape`, answering the asks heard up to `heard`, becomes the one in force. */
  #land(next: Placement, shape: Array<string | number>, heard: number, now: number): void {
    this.#planned = heard;
    // a node forgotten while the plan was worked out in slices stays out of it
    const plan = new Map([...next].filter(([node]) => this.#asks.has(node)));
    let changed = plan.size !== this.#plan.size;
    for (const [node, span] of plan) {
      if (sameSpan(span, this.#plan.get(node))) continue;
      changed = true;
      this.#unpublished.add(node);
    }
    if (changed) this.#changedAt = now;
    this.#plan = plan;
    this.#shape = shape;
  }
}

/** The slowest stage of a plan at the participants' measured speeds. */
function cost(m: PlacementModel, participants: readonly Participant[], pl: Placement): number {
  const stages = participants.flatMap((p) => {
    const span = pl.get(p.node);
    return span ? [{ span, speed: p.speed }] : [];
  });
  return stages.length ? bottleneck(m, stages) : Infinity;
}

const sameSpan = (s: Span | undefined, t: Span | undefined) => s?.start === t?.start && s?.end === t?.end;

function sameShape(a: ReadonlyArray<string | number>, b: ReadonlyArray<string | number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
