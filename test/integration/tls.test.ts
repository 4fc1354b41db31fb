import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("strata up --tls: every crossing over TLS, certificates from the tracker", () => {
  it(
    "chats with the same greedy text as without TLS and refuses whoever lacks the network's trust",
    async () => {
      const r = await denoRun(`${root}test/integration/tls.deno.ts`);
      expect(r.code, r.stderr.slice(-4000)).toBe(0);
      const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
      const texts = (run: { chats: Array<{ text: string }> }) => run.chats.map((c) => c.text);
      // one route, one chat at a time: exactly whole-model llama.cpp's text, with TLS and without
      expect(texts(out.plain)).toEqual(out.reference);
      expect(texts(out.tls)).toEqual(out.reference);
      for (const c of out.tls.chats) expect([c.status, c.done]).toEqual([200, true]);
      // every part is reached over TLS, and both hops took the fast seam over TLS
      expect(out.tls.urls.gateway).toMatch(/^https:\/\//);
      expect(out.tls.urls.tracker).toMatch(/^https:\/\//);
      expect(out.tls.urls.relay).toMatch(/^wss:\/\//);
      for (const u of out.tls.urls.nodes) expect(u).toMatch(/^https:\/\//);
      for (const c of out.tls.chats) expect(c.transports).toEqual(["tls", "tls"]);
      for (const c of out.plain.chats) expect(c.transports).toEqual(["tcp", "tcp"]);
      // without the network's CA nobody gets in; plaintext to a TLS port is not served
      expect(out.tls.gatewayNoCa).toMatch(/UnknownIssuer|certificate/i);
      expect(out.tls.nodeNoCa).toMatch(/UnknownIssuer|certificate/i);
      expect(out.tls.gatewayPlain).not.toBe("accepted");
      expect(out.tls.certifyWrongToken).toBe("[unauthenticated] node token refused");
      // a node certified by another CA, or by this one for another host, is refused by dialers
      expect(out.tls.foreignCa.grpc).toMatch(/certificate|issuer/i);
      expect(out.tls.foreignCa.fast).toMatch(/UnknownIssuer/);
      expect(out.tls.wrongHost.grpc).toMatch(/certificate|IP|altnames/i);
      expect(out.tls.wrongHost.fast).toMatch(/NotValidForName|not valid for/i);
    },
    900_000,
  );
});
