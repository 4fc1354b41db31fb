// What one client may take of a gateway: requests a minute, requests at once, and tokens a
// minute (prompt and generated). A client is its API key where the gateway checks keys, else
// its address. Each limit is a bucket that refills evenly over a minute, so a client that
// paused gets its burst back. A refusal names the limit and when to try again, and only that
// client's own count moves: another client never waits for it.

export interface ClientLimitOptions {
  /** requests a minute (0: no limit) */
  readonly requestsPerMin: number;
  /** requests in flight at once (0: no limit) */
  readonly concurrent: number;
  /** prompt and generated tokens a minute (0: no limit); a request may overdraw, the next waits */
  readonly tokensPerMin: number;
}

export const NO_CLIENT_LIMITS: ClientLimitOptions = { requestsPerMin: 0, concurrent: 0, tokensPerMin: 0 };

/** Clients kept at most; past it, idle clients with full buckets are forgotten first. */
export const MAX_CLIENTS = 100_000;

interface ClientState {
  requests: number;
  tokens: number;
  inFlight: number;
  at: number;
}

export type Admitted = { readonly ok: true; release(tokens: number): void };
export type Refused = { readonly ok: false; readonly why: string; readonly retryAfterS: number };

export class ClientLimits {
  readonly #clients = new Map<string, ClientState>();

  constructor(readonly o: ClientLimitOptions, private readonly clock: () => number = Date.now) {}

  get active(): boolean {
    return this.o.requestsPerMin > 0 || this.o.concurrent > 0 || this.o.tokensPerMin > 0;
  }

  /** Clients with state kept (for tests and metrics). */
  get clients(): number {
    return this.#clients.size;
  }

  /** A request from `client`: admitted (release it with the tokens it used) or refused. */
  admit(client: string): Admitted | Refused {
    if (!this.active) return { ok: true, release: () => {} };
    const s = this.#refill(client);
    const { requestsPerMin, concurrent, tokensPerMin } = this.o;
    if (concurrent > 0 && s.inFlight >= concurrent) {
      return { ok: false, why: `requests at once, at most ${concurrent}`, retryAfterS: 1 };
    }
    if (requestsPerMin > 0 && s.requests < 1) {
      return {
        ok: false,
        why: `requests a minute, at most ${requestsPerMin}`,
        retryAfterS: Math.ceil(((1 - s.requests) * 60) / requestsPerMin),
      };
    }
    if (tokensPerMin > 0 && s.tokens <= 0) {
      return {
        ok: false,
        why: `tokens a minute, at most ${tokensPerMin}`,
        retryAfterS: Math.max(1, Math.ceil(((1 - s.tokens) * 60) / tokensPerMin)),
      };
    }
    if (requestsPerMin > 0) s.requests -= 1;
    s.inFlight++;
    let released = false;
    return {
      ok: true,
      release: (tokens: number) => {
        if (released) return;
        released = true;
        const now = this.#refill(client);
        now.inFlight--;
        if (tokensPerMin > 0) now.tokens -= Math.max(0, tokens);
      },
    };
  }

  /** The client's buckets, topped up for the time since they were last seen. */
  #refill(client: string): ClientState {
    const now = this.clock();
    let s = this.#clients.get(client);
    if (!s) {
      if (this.#clients.size >= MAX_CLIENTS) this.#forgetIdle(now);
      s = { requests: this.o.requestsPerMin, tokens: this.o.tokensPerMin, inFlight: 0, at: now };
      this.#clients.set(client, s);
      return s;
    }
    const minutes = Math.max(0, now - s.at) / 60_000;
    s.requests = Math.min(this.o.requestsPerMin, s.requests + minutes * this.o.requestsPerMin);
    s.tokens = Math.min(this.o.tokensPerMin, s.tokens + minutes * this.o.tokensPerMin);
    s.at = now;
    return s;
  }

  /** Drops clients whose buckets are full again and who have nothing in flight, so that a
   *  flood of new addresses cannot grow the map past MAX_CLIENTS. */
  #forgetIdle(now: number): void {
    for (const [client, s] of this.#clients) {
      const minutes = (now - s.at) / 60_000;
      const full = s.requests + minutes * this.o.requestsPerMin >= this.o.requestsPerMin &&
        s.tokens + minutes * this.o.tokensPerMin >= this.o.tokensPerMin;
      if (s.inFlight === 0 && full) this.#clients.delete(client);
    }
    // still full (a flood of addresses, each with a request a moment ago): the longest known
    // without a request in flight go, down to nine tenths so the pass is not made per request;
    // one that comes back starts afresh
    for (const [client, s] of this.#clients) {
      if (this.#clients.size < MAX_CLIENTS * 0.9) break;
      if (s.inFlight === 0) this.#clients.delete(client);
    }
  }
}
