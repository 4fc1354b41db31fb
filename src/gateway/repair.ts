// Route repair: a session whose route lost a node goes on through another route. What the
// client has been sent is part of the session's prefix (prompt + tokens so far): a new route
// prefills that prefix and decodes on from the next position. The sampler's draw is seeded by
// position and the kernels are batch-invariant, so the continuation is the one the lost
// route would have produced.
import { SeamError, type SeamErrorCode } from "../seam/errors.ts";

/** Failures a new route can get past: a node or a link went away, or stopped answering. */
const REPAIRABLE: ReadonlySet<SeamErrorCode> = new Set<SeamErrorCode>([
  "unavailable",
  "deadline",
  "stream_failed",
  "expired",
  "unknown_session",
]);

export function repairable(e: unknown): e is SeamError {
  return e instanceof SeamError && REPAIRABLE.has(e.code);
}

/** What one repair did, in the response's `strata` field and on /metrics. */
export interface RepairRecord {
  /** the nodes blamed for the failure (avoided by the new route) */
  readonly nodes: string[];
  /** the failure, as its code and message */
  readonly why: string;
  /** from the failure to the new route's first token */
  readonly ms: number;
  /** of which: the tracker's new route, then the session open (resumed: the lost hop rebuilt) */
  readonly route_ms: number;
  readonly open_ms: number;
  /**
   * "lost_hop": the nodes still there kept the session and only the hops that joined were
   * rebuilt; "whole_route": the new route prefilled everything again
   */
  readonly kind: "lost_hop" | "whole_route";
  /** why a whole route was prefilled again: no token yet, or what stopped the resume */
  readonly whole_route_why?: string;
  /** hops of the new route that computed the session's positions again, and their layers */
  readonly hops_rebuilt: number;
  readonly layers_rebuilt: number;
  /** positions computed again on a rebuilt hop (the most of any): prompt and tokens so far, less
   *  what it took from a KV snapshot */
  readonly replayed_positions: number;
  /** positions a rebuilt hop took from a KV snapshot instead (the most of any; 0: none) */
  readonly snapshot_positions: number;
  /** the work redone: positions computed again × the layers they crossed, all rebuilt hops */
  readonly layer_positions_rebuilt: number;
  /** the route that took over */
  readonly route: string;
}

/**
 * The hops a failure names: a node reports the next hop it lost by its URL, the route session
 * names the first hop's URL when its own seam breaks.
 */
export function blamedHops(message: string, hops: ReadonlyArray<{ node: string; url: string }>): string[] {
  return hops.filter((h) => mentions(message, h.url)).map((h) => h.node);
}

/** `url` in `text`, not as the start of a longer URL (port 4001 is not port 40012). */
function mentions(text: string, url: string): boolean {
  for (let at = text.indexOf(url); at >= 0; at = text.indexOf(url, at + 1)) {
    const next = text[at + url.length];
    if (next === undefined || !/[0-9A-Za-z_\-.]/.test(next)) return true;
  }
  return false;
}
