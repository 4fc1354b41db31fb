// Route tickets: who may open a Route Session on a shard. The tracker (or, in a static
// setup, whoever holds the route key) signs the claims with Ed25519; a node verifies them
// with the public key alone, so a node can never mint tickets for others.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  type RouteTicketClaims,
  RouteTicketClaimsSchema,
  RouteTicketSchema,
} from "../gen/strata/seam/v1/seam_pb.ts";
import { SeamError } from "../seam/errors.ts";

export interface TicketGrant {
  readonly sessionId: string;
  readonly routeEpoch: bigint;
  readonly artifactSha256: Uint8Array;
  readonly range: { readonly start: number; readonly end: number };
}

export async function generateRouteKey(): Promise<CryptoKeyPair> {
  return await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]) as CryptoKeyPair;
}

/**
 * Signs claims' bytes with the route key. A CryptoKey signs through WebCrypto, which works in
 * every runtime; a runtime may hand a faster one in (the Deno tracker signs synchronously).
 */
export type ClaimSigner = (claims: Uint8Array) => Uint8Array | Promise<Uint8Array>;

export async function signTicket(
  key: CryptoKey | ClaimSigner,
  grant: TicketGrant,
  ttlMs: number,
  issuer: string,
  now = Date.now(),
): Promise<Uint8Array> {
  const claims = toBinary(
    RouteTicketClaimsSchema,
    create(RouteTicketClaimsSchema, { ...grant, expiresAtMs: BigInt(now + ttlMs), issuer }),
  );
  const signature = typeof key === "function"
    ? await key(claims)
    : new Uint8Array(await crypto.subtle.sign("Ed25519", key, claims.slice()));
  return toBinary(RouteTicketSchema, create(RouteTicketSchema, { claims, signature }));
}

/** Checks signature, expiry and that the ticket names exactly this session, epoch, artifact and range. */
export async function verifyTicket(
  key: CryptoKey,
  ticket: Uint8Array,
  want: TicketGrant,
  now = Date.now(),
): Promise<RouteTicketClaims> {
  const refuse = (why: string) => new SeamError("unauthenticated", `route ticket refused: ${why}`);
  if (ticket.length === 0) throw refuse("none given");
  let claims: RouteTicketClaims;
  try {
    const t = fromBinary(RouteTicketSchema, ticket);
    // copies: WebCrypto wants bytes on a plain ArrayBuffer
    if (!(await crypto.subtle.verify("Ed25519", key, t.signature.slice(), t.claims.slice()))) {
      throw refuse("bad signature");
    }
    claims = fromBinary(RouteTicketClaimsSchema, t.claims);
  } catch (e) {
    throw e instanceof SeamError ? e : refuse("malformed");
  }
  if (BigInt(now) >= claims.expiresAtMs) {
    throw refuse(`expired at ${new Date(Number(claims.expiresAtMs)).toISOString()}`);
  }
  if (claims.sessionId !== want.sessionId) throw refuse("issued for another session");
  if (claims.routeEpoch !== want.routeEpoch) throw refuse(`issued for epoch ${claims.routeEpoch}`);
  if (!sameBytes(claims.artifactSha256, want.artifactSha256)) {
    throw refuse("issued for another model artifact");
  }
  if (claims.range?.start !== want.range.start || claims.range?.end !== want.range.end) {
    throw refuse(`issued for layers ${claims.range?.start}:${claims.range?.end}`);
  }
  return claims;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** What a ticket claims, unchecked: its bearer addresses frames by it (the receiver verifies it). */
export function ticketClaims(ticket: Uint8Array): RouteTicketClaims {
  try {
    return fromBinary(RouteTicketClaimsSchema, fromBinary(RouteTicketSchema, ticket).claims);
  } catch {
    throw new SeamError("unauthenticated", "route ticket refused: malformed");
  }
}
