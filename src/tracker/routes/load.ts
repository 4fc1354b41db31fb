// Exact load per node: the sessions routes were handed out for (claims) and the sessions the
// node reports open, each counted once. A claim lives from the route's hand-out until the
// gateway says the session is done, or the node stops reporting a session it had reported,
// or — never reported — a timeout passes (so a gateway that crashed leaks nothing).

export interface LoadOptions {
  /** a claim its node never reported is dropped after this long */
  readonly claimTtlMs: number;
  /**
   * a session declared done is not counted from reports for this long: a heartbeat sampled
   * before the node freed it may arrive after the gateway's word
   */
  readonly doneQuietMs: number;
}

/** One heartbeat's view of the node's sessions. */
export interface SessionReport {
  /** sessions the node counts open */
  readonly sessions: number;
  /** their ids; empty from a node that does not list them (then `sessions` is counted) */
  readonly sessionIds: readonly string[];
}

interface Claim {
  readonly at: number;
  /** the node has reported the session open: when a report lacks it again, it closed */
  seen: boolean;
}

interface NodeLoad {
  readonly claims: Map<string, Claim>;
  reported: ReadonlySet<string>;
  /** what the node counted, listed or not */
  reportedCount: number;
}

export class SessionLoad {
  readonly #nodes = new Map<string, NodeLoad>();
  /** session id → the nodes holding a claim for it: a session's end touches only its route */
  readonly #claimedOn = new Map<string, Set<string>>();
  /** session id → when it was declared done (insertion order is time order) */
  readonly #done = new Map<string, number>();

  constructor(
    readonly options: LoadOptions,
    /** told whenever a node's load may have dropped */
    private readonly onRelease: (node: string) => void = () => {},
  ) {}

  #node(node: string): NodeLoad {
    let n = this.#nodes.get(node);
    if (!n) this.#nodes.set(node, n = { claims: new Map(), reported: new Set(), reportedCount: 0 });
    return n;
  }

  #sweep(now: number): void {
    for (const [id, at] of this.#done) {
      if (now - at <= this.options.doneQuietMs) break;
      this.#done.delete(id);
    }
  }

  /** A route through `node` was handed out for the session. */
  claim(node: string, sessionId: string, now: number): void {
    this.#node(node).claims.set(sessionId, { at: now, seen: false });
    const on = this.#claimedOn.get(sessionId);
    if (on) on.add(node);
    else this.#claimedOn.set(sessionId, new Set([node]));
  }

  /** A claim went (ended, lapsed or its node forgotten): the index follows. */
  #unclaimed(node: string, sessionId: string): void {
    const on = this.#claimedOn.get(sessionId);
    if (on?.delete(node) && on.size === 0) this.#claimedOn.delete(sessionId);
  }

  /** The session ended at its gateway: its claims go at once. Returns the nodes released. */
  done(sessionId: string, now: number): number {
    this.#sweep(now);
    this.#done.delete(sessionId);
    this.#done.set(sessionId, now);
    let released = 0;
    for (const node of this.#claimedOn.get(sessionId) ?? []) {
      if (this.#nodes.get(node)?.claims.delete(sessionId)) {
        released++;
        this.onRelease(node);
      }
    }
    this.#claimedOn.delete(sessionId);
    return released;
  }

  /** A heartbeat: the sessions open on the node now. */
  report(node: string, r: SessionReport, _now: number): void {
    const n = this.#node(node);
    const open = new Set(r.sessionIds);
    let dropped = false;
    for (const [id, c] of n.claims) {
      if (open.has(id)) c.seen = true;
      else if (c.seen) {
        // it was open and is no more
        n.claims.delete(id);
        this.#unclaimed(node, id);
        dropped = true;
      }
    }
    for (const id of n.reported) if (!open.has(id)) dropped = true;
    const count = Math.max(r.sessions, open.size);
    if (count < n.reportedCount) dropped = true;
    n.reported = open;
    n.reportedCount = count;
    if (dropped) this.onRelease(node);
  }

  /** Sessions counted against the node: claimed or reported open, each once. */
  load(node: string, now: number): number {
    const n = this.#nodes.get(node);
    if (!n) return 0;
    this.#sweep(now);
    for (const [id, c] of n.claims) {
      if (!c.seen && now - c.at > this.options.claimTtlMs) {
        n.claims.delete(id);
        this.#unclaimed(node, id);
        this.onRelease(node);
      }
    }
    // claims, and reported sessions neither claimed nor just done (counted without a set:
    // this runs for every node of every route a request looks at)
    let counted = n.claims.size, quiet = 0;
    for (const id of n.reported) {
      if (this.#done.has(id)) quiet++;
      else if (!n.claims.has(id)) counted++;
    }
    // a node that lists no ids is counted by number (a session just done counts until its
    // next heartbeat)
    return Math.max(counted, n.reportedCount - quiet);
  }

  /** The node registered again or left: what it held is gone. */
  forget(node: string): void {
    for (const id of this.#nodes.get(node)?.claims.keys() ?? []) this.#unclaimed(node, id);
    this.#nodes.delete(node);
  }
}
