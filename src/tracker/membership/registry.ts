// The nodes the tracker knows: their registrations (saved through the storage port, so
// they survive a restart) and their leases (kept in memory only: a restarted tracker gives
// each node it knew one lease to beat again, then re-learns who is live from heartbeats).
import type { Admission } from "../admission/admission.ts";
import type { NodeRecord, TrackerStorage } from "./storage.ts";

export interface Lease {
  /** when the node last registered or beat */
  readonly lastBeat: number;
  /** sessions the node reported open in its last heartbeat */
  readonly sessions: number;
  /** routes handed out through it since the tracker started */
  readonly assigned: number;
}

/** A rate differing from the one on record by less than this is the same, as far as routes go. */
const RATE_CHANGE = 0.15;

export class Registry {
  readonly #records: Map<string, NodeRecord>;
  readonly #leases = new Map<string, Lease>();
  // which registration a record belongs to: a new rate replaces the record, not the registration
  readonly #registration = new WeakMap<NodeRecord, number>();
  #registrations = 0;

  /**
   * `now`: when the tracker (re)started. The nodes it knew were serving until then: each gets
   * one lease from the restart to beat again, so running routes and their repairs keep them.
   */
  constructor(private readonly storage: TrackerStorage, readonly leaseMs: number, now?: number) {
    this.#records = new Map(storage.nodes().map((r) => [r.node, r]));
    if (now !== undefined) {
      for (const r of this.#records.values()) {
        this.#leases.set(r.node, { lastBeat: now, sessions: 0, assigned: 0 });
      }
    }
    for (const r of this.#records.values()) this.#registration.set(r, ++this.#registrations);
  }

  get size(): number {
    return this.#records.size;
  }

  get(node: string): NodeRecord | undefined {
    return this.#records.get(node);
  }

  records(): IterableIterator<NodeRecord> {
    return this.#records.values();
  }

  /** A registration, new or again: it replaces the old record and starts a lease. */
  add(rec: NodeRecord, now: number): void {
    this.#records.set(rec.node, rec);
    this.#registration.set(rec, ++this.#registrations);
    this.storage.saveNode(rec);
    this.#leases.set(rec.node, {
      lastBeat: now,
      sessions: 0,
      assigned: this.#leases.get(rec.node)?.assigned ?? 0,
    });
  }

  /** A heartbeat renews the lease; undefined for a node the tracker does not know. */
  beat(node: string, sessions: number, now: number): NodeRecord | undefined {
    const rec = this.#records.get(node);
    if (!rec) return undefined;
    this.#leases.set(node, { lastBeat: now, sessions, assigned: this.#leases.get(node)?.assigned ?? 0 });
    return rec;
  }

  /** The node left; false when it was not known. */
  remove(node: string): boolean {
    const known = this.#records.delete(node);
    this.#leases.delete(node);
    this.storage.deleteNode(node);
    return known;
  }

  /**
   * A probe's verdict on `rec`; dropped (undefined) when the node registered again meanwhile,
   * since the verdict is about a registration that no longer stands.
   */
  settle(rec: NodeRecord, admission: Admission): NodeRecord | undefined {
    const now = this.#records.get(rec.node);
    if (!now || this.#registration.get(now) !== this.#registration.get(rec)) return undefined;
    return this.#replace(now, { ...now, admission });
  }

  /**
   * The node's decode rate as its traffic measured it, kept when it differs much from the one
   * on record (a rate measured at load ran beside whatever else the machine did); the record
   * as it stands after, undefined when the node is unknown.
   */
  remeasured(node: string, tokensPerS: number): NodeRecord | undefined {
    const rec = this.#records.get(node);
    if (!rec || !(tokensPerS > 0) || !Number.isFinite(tokensPerS)) return rec;
    if (Math.abs(tokensPerS - rec.tokensPerS) <= RATE_CHANGE * rec.tokensPerS) return rec;
    return this.#replace(rec, { ...rec, tokensPerS });
  }

  /**
   * A registration another tracker replica saved: taken as is (not saved again). The same
   * registration (only its verdict or rate changed) keeps its identity, so a probe of it still
   * settles here; anything else is a new registration.
   */
  absorb(rec: NodeRecord): void {
    const old = this.#records.get(rec.node);
    if (old && sameRegistration(old, rec)) {
      this.#registration.set(rec, this.#registration.get(old)!);
    } else {
      this.#registration.set(rec, ++this.#registrations);
    }
    this.#records.set(rec.node, rec);
  }

  /** A node another replica saw leave. */
  forget(node: string): boolean {
    this.#leases.delete(node);
    return this.#records.delete(node);
  }

  /** A heartbeat another replica took: the lease runs from the latest beat either saw. True
   *  when it is newer than any this replica knew. */
  beatAt(node: string, at: number, sessions: number): boolean {
    if (!this.#records.has(node)) return false;
    const l = this.#leases.get(node);
    if (l && l.lastBeat >= at) return false;
    this.#leases.set(node, { lastBeat: at, sessions, assigned: l?.assigned ?? 0 });
    return true;
  }

  #replace(old: NodeRecord, next: NodeRecord): NodeRecord {
    this.#registration.set(next, this.#registration.get(old)!);
    this.#records.set(next.node, next);
    this.storage.saveNode(next);
    return next;
  }

  lease(node: string): Lease | undefined {
    return this.#leases.get(node);
  }

  isLive(node: string, now: number): boolean {
    const l = this.#leases.get(node);
    return !!l && now - l.lastBeat <= this.leaseMs;
  }

  /** A route through the node was handed out. */
  assigned(node: string): void {
    const l = this.#leases.get(node);
    if (l) this.#leases.set(node, { ...l, assigned: l.assigned + 1 });
  }
}

/** Two records of one registration: equal but for the admission verdict and the measured rate. */
function sameRegistration(a: NodeRecord, b: NodeRecord): boolean {
  const strip = ({ admission: _a, tokensPerS: _t, ...rest }: NodeRecord) => JSON.stringify(rest);
  return strip(a) === strip(b);
}
