import { describe, expect, it } from "vitest";
import { fromBase64 } from "../../src/bytes/base64.ts";
import { importPublicRouteKey, newRouteKeyText } from "../../src/route/keys.ts";
import { generateRouteKey, signTicket, type TicketGrant, verifyTicket } from "../../src/route/ticket.ts";
import { syncClaimSigner } from "../../server/tracker/claim-signer.ts";

const grant: TicketGrant = {
  sessionId: "sess-1",
  routeEpoch: 4n,
  artifactSha256: new Uint8Array(32).fill(7),
  range: { start: 12, end: 30 },
};

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "accepted";
  } catch (e) {
    return `${(e as { code?: string }).code}: ${(e as Error).message}`;
  }
}

describe("route tickets", () => {
  it("accepts a ticket signed for exactly this session, epoch, artifact and range", async () => {
    const { privateKey, publicKey } = await generateRouteKey();
    const t = await signTicket(privateKey, grant, 60_000, "static-route");
    const claims = await verifyTicket(publicKey, t, grant);
    expect(claims.issuer).toBe("static-route");
  });

  it("accepts a ticket the tracker's synchronous signer made, and refuses it signed by another key", async () => {
    const key = await newRouteKeyText();
    const t = await signTicket(syncClaimSigner(fromBase64(key.private!)), grant, 60_000, "tracker");
    expect((await verifyTicket(await importPublicRouteKey(key), t, grant)).issuer).toBe("tracker");
    const other = await newRouteKeyText();
    expect(await refusal(verifyTicket(await importPublicRouteKey(other), t, grant))).toBe(
      "unauthenticated: route ticket refused: bad signature",
    );
  });

  it("refuses expired, mismatched, forged and missing tickets", async () => {
    const { privateKey, publicKey } = await generateRouteKey();
    const other = await generateRouteKey();
    const now = 1_000_000;
    const t = await signTicket(privateKey, grant, 1_000, "tracker", now);
    expect(await refusal(verifyTicket(publicKey, t, grant, now + 1_000))).toMatch(
      /^unauthenticated: .*expired/,
    );
    expect(await refusal(verifyTicket(publicKey, t, { ...grant, sessionId: "sess-2" }, now))).toMatch(
      /another session/,
    );
    expect(await refusal(verifyTicket(publicKey, t, { ...grant, routeEpoch: 5n }, now))).toMatch(/epoch 4/);
    expect(await refusal(verifyTicket(publicKey, t, { ...grant, range: { start: 0, end: 12 } }, now)))
      .toMatch(/layers 12:30/);
    expect(await refusal(verifyTicket(publicKey, t, { ...grant, artifactSha256: new Uint8Array(32) }, now)))
      .toMatch(/another model artifact/);
    expect(await refusal(verifyTicket(other.publicKey, t, grant, now))).toMatch(/bad signature/);
    const tampered = t.slice();
    tampered[8] ^= 1;
    expect(await refusal(verifyTicket(publicKey, tampered, grant, now))).toMatch(/^unauthenticated/);
    expect(await refusal(verifyTicket(publicKey, new Uint8Array(0), grant, now))).toMatch(/none given/);
  });
});
