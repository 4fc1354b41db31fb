// One-way network delay in user space, for test hosts in network namespaces where the
// kernel has no sch_netem (this machine's does not): a TCP forwarder in front of a host's
// service that holds every chunk, in each direction, for the link's delay before passing it
// on, keeping order. A connection through it costs the delay once per crossing, like a link
// with that latency; bandwidth and loss are not modelled.
import { log } from "../../server/log/log.ts";

export interface DelayLink {
  readonly port: number;
  /** the current one-way delay, changeable while connections are open */
  delayMs: number;
  close(): void;
}

/**
 * Deno's timers fire 1–2 ms late here (a 20 ms timeout: p50 1.4 ms late), which a link would
 * add to every crossing: the timer is set that much early and the rest is waited out on the
 * clock, so a chunk leaves at its time (never before it).
 */
const TIMER_SLACK_MS = 2;

async function until(at: number): Promise<void> {
  const wait = at - performance.now() - TIMER_SLACK_MS;
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  while (performance.now() < at) { /* at most TIMER_SLACK_MS */ }
}

async function pump(from: Deno.Conn, to: Deno.Conn, link: { delayMs: number }): Promise<void> {
  // chunks wait in order; each leaves when its own delay has passed
  const queue: Array<{ at: number; bytes: Uint8Array }> = [];
  let writing: Promise<void> | undefined;
  const drain = async () => {
    while (queue.length) {
      await until(queue[0].at);
      const { bytes } = queue.shift()!;
      for (let n = 0; n < bytes.length;) n += await to.write(bytes.subarray(n));
    }
    writing = undefined;
  };
  const buf = new Uint8Array(64 * 1024);
  try {
    for (;;) {
      const n = await from.read(buf);
      if (n === null) break;
      queue.push({ at: performance.now() + link.delayMs, bytes: buf.slice(0, n) });
      writing ??= drain();
    }
    await writing;
  } finally {
    try {
      await to.closeWrite();
    } catch { /* already closed */ }
  }
}

/** Listens on host:port and forwards each connection to target with the delay. */
export function startDelayLink(
  listen: { hostname: string; port: number },
  target: { hostname: string; port: number },
  delayMs: number,
): DelayLink {
  const listener = Deno.listen(listen);
  const link = { delayMs };
  const conns = new Set<Deno.Conn>();
  (async () => {
    for await (const inbound of listener) {
      conns.add(inbound);
      inbound.setNoDelay(true);
      Deno.connect(target).then((outbound) => {
        conns.add(outbound);
        outbound.setNoDelay(true);
        const done = () => {
          for (const c of [inbound, outbound]) {
            conns.delete(c);
            try {
              c.close();
            } catch { /* closed */ }
          }
        };
        Promise.allSettled([pump(inbound, outbound, link), pump(outbound, inbound, link)]).then(done);
      }, (e) => {
        log.warn("delay link: target refused", {
          target: `${target.hostname}:${target.port}`,
          error: String(e),
        });
        conns.delete(inbound);
        inbound.close();
      });
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    get delayMs() {
      return link.delayMs;
    },
    set delayMs(d: number) {
      link.delayMs = d;
    },
    close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    },
  };
}
