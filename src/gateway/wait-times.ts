// How long queued requests waited: quantiles over the most recent ones (what an operator
// wants to see now), sum and count over all (what Prometheus rates).

export interface WaitSummary {
  /** over the most recent waits; 0 when none */
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly sumMs: number;
  readonly count: number;
}

export class WaitTimes {
  readonly #recent: number[] = [];
  #next = 0;
  #sumMs = 0;
  #count = 0;

  constructor(readonly window = 1024) {}

  add(ms: number): void {
    if (this.#recent.length < this.window) this.#recent.push(ms);
    else this.#recent[this.#next] = ms;
    this.#next = (this.#next + 1) % this.window;
    this.#sumMs += ms;
    this.#count++;
  }

  /** The q-quantile (nearest rank) of the recent waits; 0 when none. */
  quantile(q: number): number {
    if (!this.#recent.length) return 0;
    const sorted = [...this.#recent].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
  }

  summary(): WaitSummary {
    return { p50Ms: this.quantile(0.5), p95Ms: this.quantile(0.95), sumMs: this.#sumMs, count: this.#count };
  }
}
