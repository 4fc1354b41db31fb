// The Route Sessions a shard node holds, by id, and how each leaves: released, dropped, parked
// for a repair whose OPEN adopts its KV, or let go when it was opened and never used or sat idle
// past its lease. Released and expired sessions' epochs are remembered against replays.
import type { SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";
import type { Batcher } from "../scheduler/batcher.ts";
import { SeamError } from "../seam/errors.ts";
import type { NodeSession } from "./node-session.ts";
import type { RebuildHistory } from "./rebuild-history.ts";
import { sessionFailure } from "./replies.ts";

export interface SessionTimes {
  /** a session with no step for this long is released */
  readonly leaseMs: number;
  /** a session opened that has taken no step this long is released (default 120 s) */
  readonly unusedMs?: number;
  /** a session whose route broke keeps its KV this long for a repair (default 10 s; 0: freed at once) */
  readonly parkMs?: number;
}

const PARK_MS = 10_000;
const UNUSED_MS = 120_000;
/** ended sessions remembered against replays: ~100 bytes each */
const ENDED_KEPT = 65_536;

/** How often the table looks for sessions to let go: a quarter of its shortest time, 250 ms to 60 s. */
export function expiryPeriodMs(t: SessionTimes): number {
  return Math.min(
    60_000,
    Math.max(250, Math.min(t.leaseMs, t.parkMs ?? PARK_MS, t.unusedMs ?? UNUSED_MS) / 4),
  );
}

/** What the table asks of the node's batcher, which holds its sessions' KV. */
export type SessionKv = Pick<Batcher, "release" | "trim" | "expireIdle">;

export class SessionTable {
  readonly #sessions = new Map<string, NodeSession>();
  /** sessions released here or let go as idle, with their epoch: an OPEN at that epoch or below
   *  is a replay (a captured frame, a ticket used twice). Sessions that failed or were cancelled
   *  are not kept: a driver may open them again at the same epoch (a resume that could not go
   *  on re-prefills the same route). */
  readonly #ended = new Map<string, bigint>();

  constructor(
    readonly kv: SessionKv,
    readonly history: RebuildHistory,
    readonly times: SessionTimes,
  ) {}

  get(id: string): NodeSession | undefined {
    return this.#sessions.get(id);
  }

  ids(): string[] {
    return [...this.#sessions.keys()];
  }

  /** The sessions now, as a list the caller may drop them from. */
  all(): NodeSession[] {
    return [...this.#sessions.values()];
  }

  add(s: NodeSession): void {
    this.#sessions.set(s.id, s);
  }

  /** An OPEN's epoch against the session's: newer than the one open here and than any it ended at.
   *  Returns the session open here, if any. */
  checkEpoch(f: SeamFrame): NodeSession | undefined {
    const existing = this.#sessions.get(f.sessionId);
    if (existing && f.routeEpoch <= existing.epoch) {
      throw new SeamError("wrong_epoch", `session ${f.sessionId} is open at epoch ${existing.epoch}`);
    }
    const ended = this.#ended.get(f.sessionId);
    if (ended !== undefined && f.routeEpoch <= ended) {
      throw new SeamError("wrong_epoch", `session ${f.sessionId} ended here at epoch ${ended}`);
    }
    return existing;
  }

  /**
   * A repair's OPEN found this session here at an older epoch: `s` takes over its KV, cut
   * back to the positions the repaired route continues from. False when that cannot be.
   */
  async adopt(old: NodeSession, s: NodeSession, at: number): Promise<boolean> {
    if (old.closed || old.ending || old.nextPos < at) return false;
    old.closed = true; // its late results are dropped; its stream answers nothing more
    old.downstream?.abort("re-routed");
    void old.grammar?.close();
    for (const w of old.rebuilds.values()) w.reject(new SeamError("cancelled", "re-routed"));
    try {
      await this.kv.trim(old.id, at);
    } catch {
      old.closed = false;
      return false;
    }
    s.nextPos = at;
    s.prefixLineage = old.prefixLineage;
    this.history.handOn(old, s, at);
    return true;
  }

  /** The route broke around this session: its KV stays for a repair's OPEN, for a while. */
  async park(s: NodeSession, why: string): Promise<void> {
    if (s.closed || s.ending || s.parkedUntil) return;
    const parkMs = this.times.parkMs ?? PARK_MS;
    // only a driver that repairs routes asks for it: others' sessions are freed at once
    if (parkMs === 0 || !s.open.parkOnLoss) return await this.drop(s, why);
    s.parkedUntil = Date.now() + parkMs;
    s.downstream?.abort(why);
    s.downstream = undefined;
    for (const w of s.rebuilds.values()) w.reject(new SeamError("unavailable", why));
    s.rebuilds.clear();
  }

  /** The session leaves the table; with `remember`, its epoch is kept against replays
   *  (the oldest go first). */
  retire(s: NodeSession, remember: boolean): void {
    if (this.#sessions.get(s.id) === s) this.#sessions.delete(s.id);
    void s.grammar?.close();
    if (!remember) return;
    const before = this.#ended.get(s.id);
    this.#ended.delete(s.id);
    this.#ended.set(s.id, before !== undefined && before > s.epoch ? before : s.epoch);
    if (this.#ended.size > ENDED_KEPT) this.#ended.delete(this.#ended.keys().next().value!);
  }

  /** Ends a session this node cannot keep: frees its KV and tears down its downstream
   *  (`remember`: kept against replays, see #ended). */
  async drop(s: NodeSession, why: string, remember = false): Promise<void> {
    if (s.closed) return;
    s.closed = true;
    this.history.forget(s);
    this.retire(s, remember);
    if (!s.ending) await this.kv.release(s.id, why).catch(() => {});
    s.downstream?.abort(why);
  }

  /** Lets go of the sessions parked past their time, opened and never used, or idle past their lease. */
  async expire(): Promise<void> {
    const now = Date.now();
    const unusedMs = this.times.unusedMs ?? UNUSED_MS;
    for (const s of this.all()) {
      if (s.parkedUntil && now > s.parkedUntil) await this.drop(s, "no repair resumed it");
      else if (!s.parkedUntil && !s.ending && s.nextPos === 0 && now - s.openedAt > unusedMs) {
        s.reply(
          sessionFailure(s.identity, "expired", `session ${s.id} opened and unused for ${unusedMs} ms`),
        );
        await this.drop(s, "opened and never used", true);
      }
    }
    const ids = await this.kv.expireIdle(this.times.leaseMs);
    for (const id of ids) {
      const s = this.#sessions.get(id);
      if (!s) continue;
      s.ending = true; // the batcher already freed its KV
      this.history.forget(s);
      s.reply(
        sessionFailure(s.identity, "expired", `session ${id} idle past its ${this.times.leaseMs} ms lease`),
      );
      this.retire(s, true);
      s.closed = true;
      s.downstream?.abort("lease expired");
    }
  }
}
