// Route keys and tickets for tests: one Ed25519 pair per test file (made once, it is the
// slow part), tickets for one hop or a whole route, and the artifact they name.
import type { RouteHop } from "../../src/route/route-session.ts";
import { generateRouteKey, signTicket } from "../../src/route/ticket.ts";

/** The Model Artifact every test route serves (any 32 bytes do). */
export const ARTIFACT = new Uint8Array(32).fill(0xa7);

let pair: Promise<CryptoKeyPair> | undefined;

/** The route key of this test file: nodes get the public half, drivers' tickets the private. */
export function routeKey(): Promise<CryptoKeyPair> {
  return (pair ??= generateRouteKey());
}

export interface TicketFor {
  readonly sessionId: string;
  readonly epoch: bigint;
  readonly range: { readonly start: number; readonly end: number };
  readonly artifact?: Uint8Array;
  /** milliseconds it stays valid (negative: already expired) */
  readonly ttlMs?: number;
  /** another key (a forger's) */
  readonly key?: CryptoKey;
}

/** A ticket for one hop, signed with the test route key unless `key` says otherwise. */
export async function ticketFor(t: TicketFor): Promise<Uint8Array> {
  const key = t.key ?? (await routeKey()).privateKey;
  return await signTicket(
    key,
    {
      sessionId: t.sessionId,
      routeEpoch: t.epoch,
      artifactSha256: t.artifact ?? ARTIFACT,
      range: t.range,
    },
    t.ttlMs ?? 60_000,
    "test",
  );
}

/** The hops of a route, each with its own ticket for this session and epoch. */
export async function signedHops(
  hops: ReadonlyArray<{ url: string; range: { start: number; end: number } }>,
  sessionId: string,
  epoch = 1n,
): Promise<RouteHop[]> {
  return await Promise.all(
    hops.map(async (h) => ({ ...h, ticket: await ticketFor({ sessionId, epoch, range: h.range }) })),
  );
}

/** The route key's public half as a tracker hands it over at registration: raw bytes. */
export async function publicKeyBytes(): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.exportKey("raw", (await routeKey()).publicKey));
}
