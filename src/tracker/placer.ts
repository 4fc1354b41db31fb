// The tracker's side of placement: the nodes that asked where to go (`--layers auto`), what
// their engines can hold, and the plan over them (`placement.ts`), kept until the network
// changes. Nodes with ranges of their own count as fixed coverage.
import { memoryMisfit } from "../engine/memory-fit.ts";
import type { PlaceRequest } from "../gen/strata/tracker/v1/tracker_pb.ts";
import { planAtCuts } from "./cut-placement.ts";
import { decodeWork } from "./decode-work.ts";
import { bottleneck, type Participant, type Placement, type PlacementModel, type Span } from "./placement.ts";
import { rangeMemoryOf } from "./range-memory.ts";
import type { TrackedModel } from "./registration.ts";
import type { NodeRecord } from "./storage.ts";

/** What the placer sees of the registry. */
export interface PlacedView {
  readonly records: () => Iterable<NodeRecord>;
  readonly isLive: (node: string, now: number) => boolean;
}

/** Without a new ask, the plan is looked at again at most this often: a heartbeat reads the
 *  plan in force, and a pass over thousands of nodes per beat would cost more than the beats
 *  themselves. Registrations, verdicts and lapsed leases are seen within it. */
const PLAN_REFRESH_MS = 1000;

/** A plan this much faster (slowest stage, measured speeds) than the one in force replaces it. */
const REBALANCE_GAIN = 1.25;
/** ... but not sooner than this after the last change: moving has a cost too. */
const REBALANCE_QUIET_MS = 30_000;

export class Placer {
  readonly #asks = new Map<string, { req: PlaceRequest; at: number }>();
  #plan: Placement = new Map();
  #key = "";
  #changedAt = 0;
  readonly #planning: PlacementModel;
  readonly #fitting = new WeakMap<PlaceRequest, Map<number, boolean>>();
  // when the plan was last looked at, and whether an ask came or went since
  #refreshedAt = -Infinity;
  #asksChanged = true;

  constructor(
    private readonly model: TrackedModel,
    private readonly view: PlacedView,
    private readonly leaseMs: number,
  ) {
    this.#planning = {
      nLayer: model.nLayer,
      fits: (n, s) => this.#fits(n, s),
      work: decodeWork(model.manifest),
    };
  }

  /** A node asks where to go: its range in the plan (undefined: nothing useful fits it). */
  ask(req: PlaceRequest, now: number): Span | undefined {
    this.#asks.set(req.node, { req, at: now });
    this.#asksChanged = true;
    return this.placeOf(req.node, now);
  }

  /** Whether the tracker places this node. */
  places(node: string): boolean {
    return this.#asks.has(node);
  }

  forget(node: string): void {
    if (this.#asks.delete(node)) this.#asksChanged = true;
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
    const ask = this.#asks.get(node)?.req;
    if (!ask) return false;
    // a plan asks the same few questions many times over; an ask's answers never change
    const known = this.#fitting.get(ask);
    const key = span.start * 65_536 + span.end;
    const answer = known?.get(key) ?? this.#fitsAsked(ask, span);
    if (!known) this.#fitting.set(ask, new Map([[key, answer]]));
    else known.set(key, answer);
    return answer;
  }

  #fitsAsked(ask: PlaceRequest, span: Span): boolean {
    const memory = rangeMemoryOf(this.model, span, ask.kvCells, {
      maxSequences: ask.maxSessions,
      batchTokens: ask.batchTokens,
      batchInvariant: ask.batchInvariant,
      flashAttention: ask.flashAttention,
    });
    return !memoryMisfit(memory, Number(ask.memoryCapBytes));
  }

  #refresh(now: number): void {
    if (!this.#asksChanged && now - this.#refreshedAt < PLAN_REFRESH_MS) return;
    this.#asksChanged = false;
    this.#refreshedAt = now;
    const records = new Map([...this.view.records()].map((r) => [r.node, r]));
    const present = (node: string) =>
      this.view.isLive(node, now) || now - (this.#asks.get(node)?.at ?? -Infinity) <= this.leaseMs;
    for (const node of this.#asks.keys()) {
      // gone for good: neither live nor asking again within a lease of its last ask
      if (!present(node) && !records.has(node)) this.#asks.delete(node);
    }
    const participants: Participant[] = [...this.#asks.keys()].filter(present).map((node) => {
      const r = records.get(node);
      const held = r && this.view.isLive(node, now) ? { start: r.start, end: r.end } : undefined;
      return {
        node,
        // a node measures its decode rate on the range it holds: as work a second, it
        // compares across ranges
        speed: r && r.tokensPerS > 0 ? r.tokensPerS * this.#planning.work(r) : 0,
        // where the plan sends it (it may still be loading that), else what it holds
        current: this.#plan.get(node) ?? held,
      };
    });
    const fixed = [...records.values()]
      .filter((r) => !this.#asks.has(r.node) && r.admission === "admitted" && this.view.isLive(r.node, now))
      .map((r) => ({ start: r.start, end: r.end }));
    // the plan is looked at again when who is where changes, when a speed is first measured
    // (or changes by more than rounding), and once the quiet time after a change has passed
    const quiet = now - this.#changedAt > REBALANCE_QUIET_MS;
    const key = JSON.stringify([
      participants.map((p) => [p.node, p.current, Number(p.speed.toPrecision(2))]),
      fixed,
      quiet,
    ]);
    if (key === this.#key) return;
    const m = this.#planning;
    const cuts = this.model.manifest.cuts;
    let next = planAtCuts(m, participants, fixed, cuts);
    // measured speeds known everywhere: a plan from scratch may be worth the moves
    if (
      participants.length > 1 && participants.every((p) => p.speed > 0) && quiet
    ) {
      const afresh = planAtCuts(m, participants.map((p) => ({ ...p, current: undefined })), fixed, cuts);
      if (cost(m, participants, next) > REBALANCE_GAIN * cost(m, participants, afresh)) next = afresh;
    }
    if (!samePlan(next, this.#plan)) this.#changedAt = now;
    this.#plan = next;
    this.#key = key;
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

function samePlan(a: Placement, b: Placement): boolean {
  if (a.size !== b.size) return false;
  for (const [n, s] of a) {
    const t = b.get(n);
    if (s?.start !== t?.start || s?.end !== t?.end) return false;
  }
  return true;
}
