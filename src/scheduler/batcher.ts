// Continuous batching on one shard: every iteration takes the next ready step of each
// active session (prefill chunks and decode tokens alike), packs them into one engine
// call within a token bound, and hands each step its own output rows. Sessions never
// wait for each other's completion, only for the batch they share. The decoding sessions of a
// route of k shards take turns in k cohorts (cohorts.ts), so its shards overlap.
import { EngineError } from "../engine/errors.ts";
import type { DecodeOutputs, RangeEngine, SeqId } from "../engine/range-engine.ts";
import { SeamError } from "../seam/errors.ts";
import { CohortCaps, type RouteShards, routeShards } from "./cohorts.ts";
import {
  type PrefixBudget,
  PrefixEntries,
  type PrefixEntry,
  type PrefixKey,
  type PrefixStats,
} from "./prefix-entries.ts";

/** One unit of a session's work: a prefill chunk or one decode token. */
export interface Step {
  /** token ids (first shard) or hidden states (n × the seam width) */
  readonly tokens?: Int32Array;
  readonly hidden?: Float32Array;
  /** whether the last shard should return logits for the step's last token */
  readonly wantLogits: boolean;
}

export interface StepResult {
  /** hidden rows of every token (middle shards) or logits of the last token (last shard) */
  readonly rows: number;
  readonly dim: number;
  /** with `reuseLogits`, a last shard's logits are a view good until the batch after next */
  readonly data: Float32Array;
  readonly batchTokens: number;
  readonly batchSessions: number;
  /** graph passes of the engine call that carried the step (1: one pass over the weights) */
  readonly batchPasses: number;
  /** waiting for a batch, then the engine call that carried the step */
  readonly queuedMs: number;
  readonly computeMs: number;
}

export interface BatcherLimits {
  /** most tokens in one engine call */
  readonly maxBatchTokens: number;
  /** most steps queued per session before its sender is pushed back */
  readonly maxQueuedPerSession: number;
  /** KV cells of this shard, all sessions together */
  readonly kvCells: number;
  /**
   * Most cells one session may hold: the context the node offers (default kvCells). An engine
   * whose KV layout is "streams" gives each session only its own stream's share.
   */
  readonly kvCellsPerSession?: number;
  /**
   * Let a route's decoding sessions take turns in as many cohorts as it has shards (default
   * true). Off: every ready step goes into the next batch, and a route's shards run in lockstep.
   */
  readonly cohorts?: boolean;
  /** keep finished sessions' KV as prefix entries within this budget (none: sessions' KV is freed) */
  readonly prefix?: PrefixBudget;
  /**
   * A step's logits are a view of one of two buffers the engine writes in turn (good until the
   * batch after next), not an array of their own: for a caller that samples them at once and
   * lets them go, as a node does; a last shard then leaves the collector nothing a step
   * (SmolLM2: 192 KB; the major collections that garbage set off stalled steps by 10-20 ms).
   */
  readonly reuseLogits?: boolean;
}

interface Pending {
  readonly step: Step;
  readonly n: number;
  readonly at: number;
  readonly resolve: (r: StepResult) => void;
  readonly reject: (e: unknown) => void;
}

/** A step taken from its session's queue into a batch: in the engine until it settles. */
interface Picked {
  readonly slot: SessionSlot;
  readonly p: Pending;
  settled: boolean;
}

interface SessionSlot {
  readonly seq: SeqId;
  /** the cells it asked for at open: a cap, never reserved up front */
  readonly maxCells: number;
  /** cells its accepted steps hold or will hold once they run */
  cells: number;
  readonly opened: number;
  /** shards in the session's route: its cohorts */
  shards: RouteShards;
  readonly queue: Pending[];
  lastUsed: number;
  /** steps of it in the engine now: a session computing is not idle */
  inEngine: number;
  /** released: steps of it picked before that are dropped, not run */
  closed: boolean;
}

/** Preempted sessions remembered, so their next step hears why (context_full), not unknown_session. */
const PREEMPTED_KEPT = 1024;

export interface BatcherStats {
  readonly sessions: number;
  readonly queued: number;
  /** cells the open sessions hold or will hold once their queued steps run */
  readonly reservedCells: number;
  /** sessions ended because the shared KV pool ran short */
  readonly preempted: number;
  readonly batches: number;
  /** graph passes of those engine calls: as many as batches when every batch took one pass */
  readonly graphPasses: number;
  readonly lastBatchTokens: number;
  readonly lastBatchSessions: number;
  readonly maxBatchSessions: number;
  /** batches that left a ready step for the next one, for its cohort's turn */
  readonly cohortTurns: number;
  readonly prefillTokens: number;
  readonly decodeTokens: number;
  /** wall time inside engine calls so far: with the node's CPU time, what the node spends around its engine */
  readonly engineMs: number;
  /** one session's decode rate here, from the recent batches that carried one token (0: too few yet) */
  readonly soloTokensPerS: number;
  /** prefix entries, where the node keeps them */
  readonly prefix?: PrefixStats;
}

/** One-token batches remembered for the decode rate, and how many make it trustworthy. */
const SOLO_KEPT = 16, SOLO_ENOUGH = 8;

export class Batcher {
  readonly #sessions = new Map<string, SessionSlot>();
  #held = 0;
  #opened = 0;
  #preempted = 0;
  readonly #gaveWay = new Set<string>();
  #running = false;
  readonly #scratch = new OutputScratch();
  #stats = {
    batches: 0,
    graphPasses: 0,
    lastBatchTokens: 0,
    lastBatchSessions: 0,
    maxBatchSessions: 0,
    cohortTurns: 0,
    prefillTokens: 0,
    decodeTokens: 0,
    engineMs: 0,
  };
  // engine time of the last one-token batches: what one session costs here, measured on real
  // traffic (the rate measured at load time ran beside whatever else the machine was doing)
  readonly #soloMs: number[] = [];
  /** finished sessions' KV kept for the prompts that extend it (limits.prefix) */
  readonly #prefixes?: PrefixEntries;

  constructor(private readonly engine: RangeEngine, private readonly limits: BatcherLimits) {
    if (limits.prefix && limits.prefix.entries > 0) this.#prefixes = new PrefixEntries(limits.prefix);
  }

  get #perSession(): number {
    return Math.min(this.limits.kvCellsPerSession ?? this.limits.kvCells, this.limits.kvCells);
  }

  /**
   * Admits a session that may grow to maxCells (its cap: prompt + new tokens), on a route of
   * `shards` shards. Nothing is reserved: cells are claimed step by step as the session needs them.
   */
  open(
    sessionId: string,
    maxCells: number,
    o: { shards?: number; now?: number; prefix?: PrefixKey } = {},
  ): number {
    const now = o.now ?? Date.now();
    if (this.#sessions.has(sessionId)) {
      throw new SeamError("malformed", `session ${sessionId} is already open`);
    }
    if (!(maxCells > 0)) throw new SeamError("malformed", "a session must ask for at least one KV cell");
    if (maxCells > this.#perSession) {
      throw new SeamError(
        "kv_full",
        `KV budget: ${maxCells} cells asked; one session holds at most ${this.#perSession} here`,
      );
    }
    // a copy of a prefix entry where the engine shares cells and a slot is free (the entry stays
    // for the next session that shares it), else the entry's sequence, cut back to what it shares
    const copy = this.engine.copySequence && o.prefix ? this.#freeSequence() : undefined;
    const found = o.prefix && this.#prefixes?.take(o.prefix, maxCells, copy !== undefined);
    let seq: SeqId;
    let cells = 0;
    if (found && copy !== undefined) {
      seq = copy;
      cells = found.positions;
      // counted for the session too, though the engine shares the cells: entries go sooner, never later
      this.#held += cells;
      void this.engine.copySequence!(found.entry.seq, seq, cells).catch(() => {});
    } else if (found) {
      ({ seq } = found.entry);
      cells = found.positions;
      this.#held -= found.entry.cells - cells;
      // queued before any step of the session (the engine runs its calls in order)
      if (cells < found.entry.cells) void this.engine.trimSequence(seq, cells).catch(() => {});
    } else seq = copy ?? this.#sequence();
    this.#sessions.set(sessionId, {
      seq,
      maxCells,
      cells,
      opened: ++this.#opened,
      shards: routeShards(o.shards),
      queue: [],
      lastUsed: now,
      inEngine: 0,
      closed: false,
    });
    this.#gaveWay.delete(sessionId);
    return cells;
  }

  /** A free engine sequence, or undefined. */
  #freeSequence(): SeqId | undefined {
    try {
      return this.engine.openSequence();
    } catch {
      return undefined;
    }
  }

  /** A free engine sequence; with none, the oldest prefix entry's, emptied. */
  #sequence(): SeqId {
    try {
      return this.engine.openSequence();
    } catch (e) {
      const entry = this.#prefixes?.oldest();
      if (entry) {
        this.#held -= entry.cells;
        void this.engine.trimSequence(entry.seq, 0).catch(() => {});
        return entry.seq;
      }
      throw e instanceof EngineError ? new SeamError("kv_full", e.message) : e;
    }
  }

  /**
   * Ends a session normally and keeps its KV as a prefix entry under `key` (its tokens' blocks)
   * where the budget allows: else, or with nothing to key it by, frees it as release() does.
   */
  async keep(sessionId: string, key: PrefixKey): Promise<void> {
    const s = this.#sessions.get(sessionId);
    const held = s ? s.cells - (s.cells % key.blockTokens) : 0;
    if (
      !s || !this.#prefixes || s.queue.length > 0 || s.inEngine > 0 || held === 0 || key.blocks.length === 0
    ) {
      return await this.release(sessionId);
    }
    this.#sessions.delete(sessionId);
    s.closed = true;
    // what lies past the last whole block goes: no key names it
    if (held < s.cells) void this.engine.trimSequence(s.seq, held).catch(() => {});
    this.#held -= s.cells - held;
    for (const e of this.#prefixes.add(s.seq, held, key)) await this.#evict(e);
  }

  /**
   * A live session's KV as the engine's bytes (a snapshot for another node of this range), taken
   * between its steps: it holds at least the positions the session had when asked.
   */
  async exportSession(sessionId: string): Promise<Uint8Array> {
    const s = this.#sessions.get(sessionId);
    if (!s) throw new SeamError("unknown_session", `session ${sessionId} is not open here`);
    if (!this.engine.exportSequence) throw new SeamError("malformed", "this engine cannot export KV");
    return await this.engine.exportSequence(s.seq);
  }

  /** The prefix entries held now, each with its engine state (a draining node hands them over). */
  async *exportEntries(): AsyncGenerator<{ key: PrefixKey; cells: number; state: Uint8Array }> {
    if (!this.engine.exportSequence) return;
    for (const e of this.#prefixes?.list() ?? []) {
      const state = await this.engine.exportSequence(e.seq).catch(() => undefined);
      // an entry evicted meanwhile has nothing to give
      if (state?.length) yield { key: e.key, cells: e.cells, state };
    }
  }

  /**
   * Takes another node's snapshot in as a prefix entry of `cells` positions under `key`: in a
   * free sequence or an older entry's, with room the pool has or older entries give. It never
   * makes a live session give way: without room it is refused (kv_full), and nothing is kept.
   */
  async importEntry(key: PrefixKey, state: Uint8Array, cells: number): Promise<void> {
    const prefixes = this.#prefixes;
    if (!prefixes || !this.engine.importSequence) {
      throw new SeamError("malformed", "this node keeps no prefix entries");
    }
    if (cells > prefixes.budget.cells || cells > this.#perSession) {
      throw new SeamError(
        "kv_full",
        `a snapshot of ${cells} positions; entries here hold ${prefixes.budget.cells}`,
      );
    }
    for (let e; this.#held + cells > this.limits.kvCells && (e = prefixes.oldest());) await this.#evict(e);
    if (this.#held + cells > this.limits.kvCells) {
      throw new SeamError(
        "kv_full",
        `the KV pool has ${this.limits.kvCells - this.#held} cells free, ${cells} asked`,
      );
    }
    let seq = this.#freeSequence();
    if (seq === undefined) {
      const e = prefixes.oldest();
      if (!e) throw new SeamError("kv_full", "every sequence slot holds a live session");
      this.#held -= e.cells;
      seq = e.seq;
    }
    // claimed while the engine takes it in: sessions opened meanwhile see the room it takes
    this.#held += cells;
    const refused = async (e: SeamError) => {
      await this.engine.releaseSequence(seq!).catch(() => {});
      this.#held -= cells;
      return e;
    };
    const held = await this.engine.importSequence(seq, state).catch(async (e) => {
      throw await refused(
        new SeamError(
          "malformed",
          `the engine refused the snapshot: ${e instanceof Error ? e.message : String(e)}`,
        ),
      );
    });
    if (held < cells) {
      throw await refused(
        new SeamError("bad_position", `the snapshot holds ${held} positions, not ${cells}`),
      );
    }
    if (held > cells) await this.engine.trimSequence(seq, cells);
    for (const e of prefixes.add(seq, cells, key)) await this.#evict(e);
  }

  async #evict(e: PrefixEntry): Promise<void> {
    this.#held -= e.cells;
    await this.engine.releaseSequence(e.seq);
  }

  /** Queues a step; resolves with its outputs once the batch that carried it ran. */
  submit(sessionId: string, step: Step, now = Date.now()): Promise<StepResult> {
    let s: SessionSlot, n: number;
    try {
      ({ s, n } = this.#admit(sessionId, step));
      this.#claim(s, n);
    } catch (e) {
      return Promise.reject(e);
    }
    s.lastUsed = now;
    const at = performance.now();
    const done = new Promise<StepResult>((resolve, reject) => s.queue.push({ step, n, at, resolve, reject }));
    this.#kick();
    return done;
  }

  /** Throws the refusal submit() would give this step now (a caller that must know at once). */
  check(sessionId: string, step: Step): void {
    this.#admit(sessionId, step);
  }

  #admit(sessionId: string, step: Step): { s: SessionSlot; n: number } {
    const s = this.#sessions.get(sessionId);
    if (!s && this.#gaveWay.has(sessionId)) {
      throw new SeamError("context_full", `session ${sessionId} gave way: the KV pool ran short`);
    }
    if (!s) throw new SeamError("unknown_session", `session ${sessionId} is not open here`);
    if (s.queue.length >= this.limits.maxQueuedPerSession) {
      throw new SeamError("overloaded", `session ${sessionId} has ${s.queue.length} steps queued`);
    }
    const n = step.tokens?.length ?? (step.hidden ? step.hidden.length / this.engine.facts.seamWidth : 0);
    if (!Number.isInteger(n) || n < 1 || n > this.limits.maxBatchTokens) {
      throw new SeamError("bad_tensor", `a step of ${n} tokens (1 to ${this.limits.maxBatchTokens})`);
    }
    if (s.cells + n > s.maxCells) {
      throw new SeamError(
        "context_full",
        `session ${sessionId} holds ${s.cells} of its ${s.maxCells} KV cells; ${n} more do not fit`,
      );
    }
    return { s, n };
  }

  /**
   * Claims n cells for a step. When the shared pool runs short, the youngest sessions give
   * way (ended with context_full, their cells freed), down to the one asking: the oldest
   * sessions, which hold the most work, run to their end.
   */
  #claim(s: SessionSlot, n: number): void {
    // prefix entries go first, oldest first: they never make a live session give way
    for (let e; this.#held + n > this.limits.kvCells && (e = this.#prefixes?.oldest());) {
      void this.#evict(e).catch(() => {});
    }
    if (this.#held + n > this.limits.kvCells) {
      // only sessions younger than the asker give way, and only when that makes room
      const younger = [...this.#sessions].filter(([, x]) => x.opened > s.opened)
        .sort((a, b) => b[1].opened - a[1].opened);
      const freeable = younger.reduce((k, [, x]) => k + x.cells, 0);
      if (this.#held - freeable + n > this.limits.kvCells) {
        throw new SeamError(
          "context_full",
          `the KV pool is full: ${
            this.limits.kvCells - this.#held
          } of ${this.limits.kvCells} cells free, ${n} asked`,
        );
      }
      for (const [id] of younger) {
        if (this.#held + n <= this.limits.kvCells) break;
        this.#preempted++;
        this.#gaveWay.add(id);
        if (this.#gaveWay.size > PREEMPTED_KEPT) this.#gaveWay.delete(this.#gaveWay.values().next().value!);
        void this.release(id, "preempted: the KV pool ran short", "context_full").catch(() => {});
      }
    }
    s.cells += n;
    this.#held += n;
  }

  /** Cancels queued steps and frees the session's KV; the others are untouched. */
  async release(
    sessionId: string,
    why = "released",
    code: "cancelled" | "context_full" = "cancelled",
  ): Promise<void> {
    const s = this.#sessions.get(sessionId);
    if (!s) throw new SeamError("unknown_session", `session ${sessionId} is not open here`);
    this.#sessions.delete(sessionId);
    s.closed = true;
    this.#held -= s.cells;
    for (const p of s.queue.splice(0)) p.reject(new SeamError(code, `session ${sessionId} ${why}`));
    await this.engine.releaseSequence(s.seq);
  }

  /**
   * Takes a session back to `pos` positions for a repaired route: its queued steps (the old
   * route's) are refused, the step in the engine finishes first, then the later positions go.
   */
  async trim(sessionId: string, pos: number, now = Date.now()): Promise<void> {
    const s = this.#sessions.get(sessionId);
    if (!s) throw new SeamError("unknown_session", `session ${sessionId} is not open here`);
    for (const p of s.queue.splice(0)) {
      p.reject(new SeamError("cancelled", `session ${sessionId} was re-routed`));
    }
    while (s.inEngine > 0 && !s.closed) await new Promise((r) => setTimeout(r, 2));
    if (s.closed) throw new SeamError("unknown_session", `session ${sessionId} ended while re-routed`);
    await this.engine.trimSequence(s.seq, pos);
    this.#held -= s.cells - pos;
    s.cells = pos;
    s.lastUsed = now;
  }

  /**
   * Cuts a session that took a prefix entry back to `pos` positions before its first step (its
   * route goes on from there); returns `pos`. The engine trims it before any later call.
   */
  cutBack(sessionId: string, pos: number): number {
    const s = this.#sessions.get(sessionId);
    if (!s) throw new SeamError("unknown_session", `session ${sessionId} is not open here`);
    if (s.queue.length > 0 || s.inEngine > 0 || pos > s.cells || pos < 0) {
      throw new SeamError("bad_position", `session ${sessionId} cannot go back to ${pos} now`);
    }
    void this.engine.trimSequence(s.seq, pos).catch(() => {});
    this.#held -= s.cells - pos;
    s.cells = pos;
    return pos;
  }

  /** The session now runs on a route of `shards` shards (a repaired route may have more or fewer). */
  reroute(sessionId: string, shards: number): void {
    const s = this.#sessions.get(sessionId);
    if (!s) throw new SeamError("unknown_session", `session ${sessionId} is not open here`);
    s.shards = routeShards(shards);
  }

  /** Positions the session holds in the engine. */
  position(sessionId: string): number {
    const s = this.#sessions.get(sessionId);
    if (!s) throw new SeamError("unknown_session", `session ${sessionId} is not open here`);
    return this.engine.nextPosition(s.seq);
  }

  /** Releases sessions idle for longer than leaseMs; returns their ids. */
  async expireIdle(leaseMs: number, now = Date.now()): Promise<string[]> {
    const idle = [...this.#sessions].filter(([, s]) =>
      s.queue.length === 0 && s.inEngine === 0 && now - s.lastUsed > leaseMs
    );
    for (const [id] of idle) await this.release(id, "expired");
    return idle.map(([id]) => id);
  }

  stats(): BatcherStats {
    let queued = 0;
    for (const s of this.#sessions.values()) queued += s.queue.length;
    return {
      sessions: this.#sessions.size,
      queued,
      reservedCells: this.#held,
      preempted: this.#preempted,
      ...this.#stats,
      soloTokensPerS: soloRate(this.#soloMs),
      prefix: this.#prefixes?.stats(),
    };
  }

  #kick(): void {
    if (this.#running) return;
    this.#running = true;
    // let submissions of the same tick join the first batch
    queueMicrotask(() => void this.#loop());
  }

  async #loop(): Promise<void> {
    // a computed batch's results, handed out once the next batch is in the engine: what they
    // set off here (sampling, encoding, sending on) then runs while the engine computes
    // instead of between its batches (a step's next step never rides in that next batch: it
    // comes back around the route first)
    let handOut: (() => void) | undefined;
    try {
      for (;;) {
        const picked = this.#pick();
        if (picked.length === 0) return;
        const running = this.#run(picked);
        handOut?.();
        handOut = undefined;
        try {
          handOut = await running;
        } catch (err) {
          // never strand a step: whatever went wrong ends the steps of this batch, not the loop
          for (const x of picked) this.#fail(x, err);
        }
      }
    } finally {
      handOut?.();
      this.#running = false;
      if ([...this.#sessions.values()].some((s) => s.queue.length > 0)) this.#kick();
    }
  }

  /**
   * The head step of each session with work, the longest waiting first, within the token bound
   * and each route's cohort: steps that came in one batch from the shard before stay together.
   */
  #pick(): Picked[] {
    const out: Picked[] = [];
    const ready = [...this.#sessions.values()].filter((s) => s.queue.length > 0)
      .sort((a, b) => a.queue[0].at - b.queue[0].at);
    const caps = this.limits.cohorts === false ? undefined : new CohortCaps(this.#sessions.values());
    let tokens = 0;
    for (const slot of ready) {
      const p = slot.queue[0];
      if (tokens + p.n > this.limits.maxBatchTokens) continue;
      if (caps && !caps.take(slot.shards)) continue;
      slot.queue.shift();
      slot.inEngine++;
      out.push({ slot, p, settled: false });
      tokens += p.n;
    }
    if (caps?.held) this.#stats.cohortTurns++;
    return out;
  }

  /**
   * A picked step leaves the engine as its outcome is given, not when the loop resumes: its
   * caller may ask about the session first. Later outcomes of a settled step are dropped.
   */
  #settle(x: Picked): boolean {
    if (x.settled) return false;
    x.settled = true;
    x.slot.inEngine--;
    return true;
  }

  #done(x: Picked, r: StepResult): void {
    if (this.#settle(x)) x.p.resolve(r);
  }

  #fail(x: Picked, e: unknown): void {
    if (this.#settle(x)) x.p.reject(e);
  }

  /** Computes a batch; resolves with what hands its results to their steps (failures are settled here). */
  async #run(all: Picked[]): Promise<(() => void) | undefined> {
    // a session released since its step was picked (e.g. while a failed batch is retried)
    const picked = all.filter((x) => {
      if (x.slot.closed) this.#fail(x, new SeamError("cancelled", "the session was released"));
      return !x.slot.closed;
    });
    if (picked.length === 0) return;
    const e = this.engine;
    const n = picked.reduce((k, x) => k + x.p.n, 0);
    const seq = new Int32Array(n);
    const pos = new Int32Array(n);
    const outputs = new Uint8Array(n);
    const tokens = e.input === "tokens" ? new Int32Array(n) : undefined;
    const hidden = e.input === "hidden" ? new Float32Array(n * e.facts.seamWidth) : undefined;
    let o = 0, logitRows = 0;
    for (const { slot, p } of picked) {
      const start = e.nextPosition(slot.seq);
      for (let i = 0; i < p.n; i++) {
        seq[o + i] = slot.seq;
        pos[o + i] = start + i;
      }
      if (p.step.wantLogits) {
        outputs[o + p.n - 1] = 1;
        logitRows++;
      }
      if (tokens) tokens.set(p.step.tokens ?? new Int32Array(p.n).fill(-1), o);
      if (hidden) {
        hidden.set(
          p.step.hidden ?? new Float32Array(p.n * e.facts.seamWidth).fill(NaN),
          o * e.facts.seamWidth,
        );
      }
      o += p.n;
    }
    // logits are what a step sampled from and then let go (hidden states are sent and kept)
    const into = e.output === "logits" && this.limits.reuseLogits
      ? this.#scratch.take(logitRows * e.facts.nVocab)
      : undefined;
    let out: DecodeOutputs;
    const t0 = performance.now();
    try {
      out = await e.decode({ tokens, hidden, seq, pos, outputs, into });
    } catch (err) {
      // one bad step must not sink the others: run them again without the batch-mates
      if (picked.length > 1) {
        for (const x of picked) (await this.#run([x]))?.();
        return;
      }
      this.#fail(picked[0], err);
      return;
    }
    const t1 = performance.now();
    this.#stats.batches++;
    this.#stats.engineMs += t1 - t0;
    const passes = out.passes ?? 1;
    this.#stats.graphPasses += passes;
    this.#stats.lastBatchTokens = n;
    this.#stats.lastBatchSessions = picked.length;
    this.#stats.maxBatchSessions = Math.max(this.#stats.maxBatchSessions, picked.length);
    if (n === 1) {
      this.#soloMs.push(t1 - t0);
      if (this.#soloMs.length > SOLO_KEPT) this.#soloMs.shift();
    }
    for (const { p } of picked) {
      if (p.n > 1) this.#stats.prefillTokens += p.n;
      else this.#stats.decodeTokens += 1;
    }
    return () => {
      let row = 0;
      for (const x of picked) {
        const p = x.p;
        // middle shards return every token's row; the last shard only the marked ones
        const rows = e.output === "hidden" ? p.n : p.step.wantLogits ? 1 : 0;
        // the engine's output is fresh each batch: a step alone in it takes it as it is; steps
        // that share it get rows of their own (what a shard keeps of one must not hold the others)
        const data = picked.length === 1
          ? out.data.subarray(row * out.dim, (row + rows) * out.dim)
          : out.data.slice(row * out.dim, (row + rows) * out.dim);
        row += rows;
        this.#done(x, {
          rows,
          dim: out.dim,
          data,
          batchTokens: n,
          batchSessions: picked.length,
          batchPasses: passes,
          queuedMs: t0 - p.at,
          computeMs: t1 - t0,
        });
      }
    };
  }
}

/** Outputs larger than this (floats) get an array of their own: a long prompt's buffer is not kept. */
const SCRATCH_MAX = 1 << 20;

/**
 * The engine's logits buffers, two taken in turn: a batch's logits are handed out (and sampled,
 * before the loop next waits) while the next batch computes into the other. A step's logits
 * are a view of one, good until the batch after next: whoever keeps them longer copies them.
 */
class OutputScratch {
  readonly #bufs: Float32Array[] = [];
  #turn = 0;

  take(size: number): Float32Array | undefined {
    if (size === 0 || size > SCRATCH_MAX) return undefined;
    this.#turn ^= 1;
    const b = this.#bufs[this.#turn];
    if (b && b.length >= size) return b;
    return (this.#bufs[this.#turn] = new Float32Array(Math.max(size, 2 * (b?.length ?? 0))));
  }
}

/** Tokens a second at the median of the remembered one-token batches (the median: a stall or two do not count). */
function soloRate(ms: readonly number[]): number {
  if (ms.length < SOLO_ENOUGH) return 0;
  const sorted = [...ms].sort((a, b) => a - b);
  return 1000 / Math.max(sorted[sorted.length >> 1], 1e-3);
}
