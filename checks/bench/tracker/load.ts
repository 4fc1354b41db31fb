// The load generator of `strata bench tracker`: route requests offered at a fixed rate (open
// loop: a request is sent when it is due, whether or not earlier ones have been answered, and
// its latency counts from when it was due, so a stalled tracker cannot hide its queue), or as
// fast as a fixed number of workers can (closed loop, `rate` 0).

export interface LoadOptions {
  /** requests a second; 0: closed loop with `workers` */
  readonly rate: number;
  readonly workers: number;
  /** when to stop offering (Date.now() ms) */
  readonly until: number;
  /** requests left waiting at once before new ones are shed (open loop) */
  readonly maxOutstanding?: number;
}

export interface LoadResult {
  /** requests that were due */
  readonly offered: number;
  /** due but not sent: `maxOutstanding` were already waiting */
  readonly shed: number;
}

/** Runs `request(dueAt, i)` (dueAt: performance.now() ms) as the options say, until `until`, and
 *  waits for the ones in flight. */
export async function offerLoad(
  o: LoadOptions,
  request: (dueAt: number, i: number) => Promise<void>,
): Promise<LoadResult> {
  let offered = 0, shed = 0;
  if (o.rate <= 0) {
    await Promise.all(Array.from({ length: o.workers }, async (_, w) => {
      while (Date.now() < o.until) {
        offered++;
        await request(performance.now(), w);
      }
    }));
    return { offered, shed };
  }
  const maxOutstanding = o.maxOutstanding ?? 512;
  const inFlight = new Set<Promise<void>>();
  const start = performance.now();
  // one timer every 2 ms sends what has come due: no timer per request
  while (Date.now() < o.until) {
    const due = Math.floor(((performance.now() - start) * o.rate) / 1000);
    for (; offered < due; offered++) {
      const dueAt = start + (offered * 1000) / o.rate;
      if (inFlight.size >= maxOutstanding) {
        shed++;
        continue;
      }
      const p = request(dueAt, offered).catch(() => {}).finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  await Promise.all(inFlight);
  return { offered, shed };
}
