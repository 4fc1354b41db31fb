// A static route made ready to drive: each hop's range checked to continue the last, and
// a ticket signed for each hop.
import { SeamError } from "../seam/errors.ts";
import type { RouteHop } from "./route-session.ts";
import { type ClaimSigner, signTicket } from "./ticket.ts";

export interface HopPlan {
  readonly url: string;
  readonly range: { readonly start: number; readonly end: number };
}

/** Throws unless the ranges cover [0, nLayer) exactly once, in order. */
export function checkCoverage(hops: readonly HopPlan[], nLayer: number): void {
  let at = 0;
  for (const h of hops) {
    if (h.range.start !== at || h.range.end <= h.range.start) {
      throw new SeamError(
        "malformed",
        `hop ${h.url} holds ${h.range.start}:${h.range.end}; the route needs layer ${at} next`,
      );
    }
    at = h.range.end;
  }
  if (at !== nLayer) throw new SeamError("malformed", `the route stops at layer ${at} of ${nLayer}`);
}

export async function signRoute(
  key: CryptoKey | ClaimSigner,
  hops: readonly HopPlan[],
  grant: { sessionId: string; routeEpoch: bigint; artifactSha256: Uint8Array },
  ttlMs: number,
  issuer: string,
  now = Date.now(),
): Promise<RouteHop[]> {
  return await Promise.all(hops.map(async (h) => ({
    url: h.url,
    range: h.range,
    ticket: await signTicket(key, { ...grant, range: h.range }, ttlMs, issuer, now),
  })));
}
