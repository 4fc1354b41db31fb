// The gateway's load over the last minutes, a second at a time, for the network page's charts:
// tokens/s, TTFT percentiles, the request queue's depth and each node's busy share.

/** What a step's reply says of one node (the seam's NodeTelemetry has these fields). */
export interface NodeStep {
  readonly node: string;
  readonly computeMs: number;
  readonly sampleMs: number;
  /** sessions that shared the node's engine call: each carries its share of the time */
  readonly batchSessions: number;
}

interface Second {
  tokens: number;
  ttftMs: number[];
  queue: number;
  /** node → engine milliseconds spent on this gateway's sessions in this second */
  busy: Map<string, number>;
}

export interface LoadSeries {
  /** Unix seconds, oldest first */
  readonly t: number[];
  readonly tokensPerS: number[];
  /** over the last `percentileWindowS` seconds at each point; null while none came */
  readonly ttftP50Ms: Array<number | null>;
  readonly ttftP95Ms: Array<number | null>;
  readonly queueDepth: number[];
  /** node → share of each second its engine spent on this gateway's sessions (0–1) */
  readonly busy: Record<string, number[]>;
}

export class LoadHistory {
  readonly #seconds = new Map<number, Second>();

  constructor(readonly windowS = 600, readonly percentileWindowS = 30) {}

  #at(nowMs: number): Second {
    const s = Math.floor(nowMs / 1000);
    let b = this.#seconds.get(s);
    if (!b) {
      this.#seconds.set(s, b = { tokens: 0, ttftMs: [], queue: 0, busy: new Map() });
      for (const k of this.#seconds.keys()) if (k <= s - this.windowS) this.#seconds.delete(k);
    }
    return b;
  }

  /** One token came back through a route: each node's share of its engine call counts as busy. */
  step(nowMs: number, nodes: readonly NodeStep[]): void {
    const b = this.#at(nowMs);
    b.tokens++;
    for (const n of nodes) {
      const ms = (n.computeMs + n.sampleMs) / Math.max(1, n.batchSessions);
      b.busy.set(n.node, (b.busy.get(n.node) ?? 0) + ms);
    }
  }

  firstToken(nowMs: number, ttftMs: number): void {
    this.#at(nowMs).ttftMs.push(ttftMs);
  }

  /** The request queue's depth now: the second keeps its deepest. */
  queue(nowMs: number, depth: number): void {
    const b = this.#at(nowMs);
    b.queue = Math.max(b.queue, depth);
  }

  series(nowMs: number): LoadSeries {
    const last = Math.floor(nowMs / 1000);
    const first = last - this.windowS + 1;
    const nodes = new Set<string>();
    for (const b of this.#seconds.values()) for (const n of b.busy.keys()) nodes.add(n);
    const out = {
      t: [] as number[],
      tokensPerS: [] as number[],
      ttftP50Ms: [] as Array<number | null>,
      ttftP95Ms: [] as Array<number | null>,
      queueDepth: [] as number[],
      busy: Object.fromEntries([...nodes].map((n) => [n, [] as number[]])),
    };
    const recent: number[][] = [];
    for (let s = first; s <= last; s++) {
      const b = this.#seconds.get(s);
      out.t.push(s);
      out.tokensPerS.push(b?.tokens ?? 0);
      out.queueDepth.push(b?.queue ?? 0);
      for (const n of nodes) out.busy[n].push(Math.min(1, (b?.busy.get(n) ?? 0) / 1000));
      recent.push(b?.ttftMs ?? []);
      if (recent.length > this.percentileWindowS) recent.shift();
      const ttft = recent.flat().sort((x, y) => x - y);
      out.ttftP50Ms.push(percentile(ttft, 0.5));
      out.ttftP95Ms.push(percentile(ttft, 0.95));
    }
    return out;
  }
}

/** The nearest-rank percentile of sorted values (null for none). */
function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
}
