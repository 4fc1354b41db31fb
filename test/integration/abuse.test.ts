import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

/** A node's peak RSS may grow this much under abuse: one flooding connection holds at most
 *  80 MB of frames waiting (MUX_LIMITS) and one body of up to 64 MB being read. */
const RSS_BOUND_MB = 256;

describe("abuse beside honest chats (strata up, one route of two nodes)", () => {
  it(
    "8 honest chats keep their text while hostile clients and a hostile peer are refused, bounded and cleaned up",
    async () => {
      const r = await denoRun(`${root}test/integration/abuse.deno.ts`);
      expect(r.code, r.stderr.slice(-4000)).toBe(0);
      const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
      // the honest chats: all served, whole-model llama.cpp's greedy text (or parted from it only
      // where the whole model was within 0.5 σ of choosing otherwise), the same with and without abuse
      for (const run of [out.calm, out.abused]) {
        expect(run.chats.length).toBe(8);
        for (const c of run.chats) {
          expect([c.status, c.done, c.error], JSON.stringify(c)).toEqual([200, true, undefined]);
          if (c.divergence) expect(c.divergence.nearTie, JSON.stringify(c)).toBe(true);
        }
      }
      expect(out.abused.chats.map((c: { text: string }) => c.text)).toEqual(
        out.calm.chats.map((c: { text: string }) => c.text),
      );
      const h = out.hostile;
      // the gateway: the flooding key is limited (429), never the honest ones
      expect(h.gateway_flood["429"]).toBeGreaterThan(0);
      expect(Object.keys(h.gateway_flood).every((s) => s === "200" || s === "429"), JSON.stringify(h)).toBe(
        true,
      );
      expect(h.slowloris.connections).toBe(200);
      // a node's port: 32 connections from one address, the rest closed at once; those that said
      // nothing dropped at the preface deadline
      expect(h.seams.connections.closed_within_5s).toBe(8);
      expect(h.seams.connections.closed_by_now).toBe(40);
      // 1,024 streams on one connection, the rest refused
      expect(h.seams.streams).toMatchObject({ dialed: 1100, refused: 76, first_refused: 1024, open: 1024 });
      // frames for no session, garbage, a 70 MB header, a forged ticket, a replayed OPEN
      expect(h.seams.flood.first_reply).toMatch(/^reply unknown_session/);
      expect(h.seams.raw.garbage).toMatch(/^stream_failed: .*not a seam frame/);
      expect(h.seams.raw.oversized).toMatch(/^stream_failed: .*exceeds 67108864/);
      expect(h.seams.forged_ticket).toMatch(/^reply unauthenticated: route ticket refused/);
      expect(h.seams.replayed_open).toMatch(/^reply wrong_epoch: session .* ended here at epoch/);
      // 300 calls, then a polite close (GOAWAY), on the tracker's port and a node's: both answer after
      for (const side of ["tracker", "node"]) {
        expect(h.polite_close[side], side).toEqual({ calls: 300, answered_after: true });
      }
      // the relay: 1,024 channels for one peer, the rest refused
      expect(h.relay).toMatchObject({ dialed: 1100, refused: 76 });
      // bounded: each node's peak RSS under abuse within the stated bound of its calm peak
      for (const n of ["r0n0", "r0n1"]) {
        expect(out.abused.rss_mb[n] - out.calm.rss_mb[n], JSON.stringify(out.abused.rss_mb)).toBeLessThan(
          RSS_BOUND_MB,
        );
      }
      // freed: no session left (the unused ones expired), no relay channel, sockets as before
      expect(out.freed.after.sessions).toEqual({ r0n0: 0, r0n1: 0 });
      expect(out.freed.after.relay.channels).toBe(out.freed.before.relay.channels);
      for (const n of ["r0n0", "r0n1"]) {
        expect(out.freed.after.fds[n] - out.freed.before.fds[n], JSON.stringify(out.freed))
          .toBeLessThanOrEqual(8);
      }
    },
    900_000,
  );
});
