// The volunteer side of the gateway: the page a person opens to host a shard in their tab,
// its bundle and the WASM engine, and the small JSON API the tab uses to learn its
// assignment, get a relay identity, and join, renew and leave the tracker. The tab reaches
// the tracker only through here (browsers speak neither h2c nor the node token).
import type { Hono } from "hono";
import { join } from "node:path";
import type { ArtifactManifest } from "../../src/artifact/pieces.ts";
import { formatRange, type LayerRange, layerRange } from "../../src/engine/layer-range.ts";
import { rangeMemory } from "../../src/engine/memory-fit.ts";
import { WASM32_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";
import { shardBytes } from "../../src/gguf/manifest.ts";
import { peerToken, verifyPeerToken } from "../../src/relay/token.ts";
import { relayHopUrl } from "../../src/route/hop-url.ts";
import { assignRange } from "../../src/tracker/assign.ts";
import { toBase64 } from "../../src/bytes/base64.ts";
import { ApiError } from "../../src/gateway/openai.ts";
import { bytesToHex, hexToBytes } from "../../src/bytes/hex.ts";
import { bundleWebEntry } from "../web/bundle.ts";
import { engineFileRoutes, ISOLATION_HEADERS } from "../web/engine-files.ts";
import type { trackerClient } from "../tracker/client.ts";
import { repoRoot } from "../paths.ts";
import { log } from "../log/log.ts";

export interface VolunteerOptions {
  /** the relay as browsers (and the tracker) reach it, ws://… */
  readonly relayUrl: string;
  /** mints each tab's relay token: its name is its node name */
  readonly relaySecret: string;
  /** the tracker's node token, used on the tabs' behalf */
  readonly nodeToken: string;
  /** the ranges volunteers are offered */
  readonly split: readonly LayerRange[];
}

/** A tab's engine settings: small enough for any laptop, enough for a handful of sessions. */
// batch-invariant: each of the 8 sessions has a KV stream of 1024 cells
const TAB = { kvCells: 8192, maxSessions: 8, batchTokens: 256 } as const;

export async function volunteerRoutes(
  app: Hono,
  o: VolunteerOptions,
  m: { manifest: ArtifactManifest; nEmbdKv: number; modelName: string },
  tracker: ReturnType<typeof trackerClient>["client"],
): Promise<void> {
  const [page, bundle] = await Promise.all([
    Deno.readTextFile(join(repoRoot, "web", "volunteer", "index.html")),
    bundleWebEntry("web/volunteer/main.ts"),
  ]);
  const isolated = { ...ISOLATION_HEADERS, "Cache-Control": "no-store" };
  app.use("/volunteer/*", async (c, next) => {
    await next();
    for (const [k, v] of Object.entries(isolated)) c.header(k, v);
  });
  app.get("/volunteer", (c) => c.redirect("/volunteer/"));
  app.get("/volunteer/", (c) => c.html(page, 200, isolated));
  app.get("/volunteer/main.js", (c) => c.body(bundle, 200, { "Content-Type": "text/javascript" }));
  engineFileRoutes(app, "/volunteer/engine");

  const memoryOf = (r: LayerRange) =>
    rangeMemory({
      weightBytes: shardBytes(m.manifest, r.start, r.end).bytes,
      layers: r.end - r.start,
      kvCells: TAB.kvCells,
      nEmbdKv: m.nEmbdKv,
    });
  const json = async <T>(req: Request): Promise<T> => {
    try {
      return await req.json() as T;
    } catch {
      throw new ApiError(400, "a JSON body is expected");
    }
  };
  const nameOf = async (token: unknown): Promise<string> => {
    const name = typeof token === "string" ? await verifyPeerToken(o.relaySecret, token) : undefined;
    if (!name) throw new ApiError(401, "unknown volunteer token");
    return name;
  };
  app.get("/volunteer/api/assignment", async (c) => {
    const cap = Number(c.req.query("memoryCap") ?? WASM32_MEMORY_CAP);
    const asked = c.req.query("layers");
    let candidates = o.split;
    if (asked) {
      try {
        const [a, b] = asked.split(":").map(Number);
        candidates = [layerRange(a, b, m.manifest.nLayer)];
      } catch (e) {
        throw new ApiError(400, `layers=${asked}: ${(e as Error).message}`);
      }
    }
    const { nodes } = await tracker.nodes({}, { timeoutMs: 5000 });
    const mine = nodes.filter((n) => n.shard && bytesToHex(n.shard.artifactSha256) === m.manifest.artifact);
    const hosted = mine.map((n) => ({ range: n.shard!.range!, live: n.live }));
    const a = assignRange(candidates, hosted, memoryOf, cap);
    if (!a.ok) throw new ApiError(409, a.why);
    const origin = `${new URL(c.req.url).origin}/artifacts/${m.manifest.artifact}`;
    const peers = mine
      .filter((n) => n.live && n.shard!.artifactUrl)
      .map((n) => ({
        url: n.shard!.artifactUrl,
        layers: { start: n.shard!.range!.start, end: n.shard!.range!.end },
      }));
    return c.json({
      model: m.modelName,
      artifact: m.manifest.artifact,
      nLayer: m.manifest.nLayer,
      range: { start: a.range.start, end: a.range.end },
      hostsAlready: a.hosts,
      fileBytes: m.manifest.fileSize,
      downloadBytes: shardBytes(m.manifest, a.range.start, a.range.end).bytes,
      memory: a.memory,
      memoryCapBytes: cap,
      ...TAB,
      manifestUrl: `${origin}/manifest`,
      sources: [{ url: origin }, ...peers],
    });
  });

  app.post("/volunteer/api/token", async (c) => {
    const name = `vol-${crypto.randomUUID().slice(0, 8)}`;
    return c.json({ name, token: await peerToken(o.relaySecret, name), relayUrl: o.relayUrl });
  });

  app.post("/volunteer/api/join", async (c) => {
    const b = await json<{
      token: string;
      range: { start: number; end: number };
      engine: string;
      decodeTokensPerS: number;
      kvCells: number;
      sessionCells: number;
      maxSessions: number;
      memoryCapBytes: number;
    }>(c.req.raw);
    const name = await nameOf(b.token);
    const r = await tracker.register({
      token: o.nodeToken,
      node: name,
      urls: [relayHopUrl(o.relayUrl, name)],
      shard: {
        artifactSha256: hexToBytes(m.manifest.artifact),
        range: b.range,
        engine: String(b.engine),
        kvCells: b.kvCells,
        sessionCells: Number(b.sessionCells) || 0,
        maxSessions: b.maxSessions,
        decodeTokensPerS: b.decodeTokensPerS,
        memoryCapBytes: BigInt(Math.max(0, Math.floor(b.memoryCapBytes))),
      },
    }, { timeoutMs: 30_000 });
    log.info("volunteer joined", { node: name, layers: formatRange(layerRange(b.range.start, b.range.end)) });
    return c.json({ name, leaseMs: Number(r.leaseMs), routePublicKey: toBase64(r.routePublicKey) });
  });

  app.post("/volunteer/api/heartbeat", async (c) => {
    const b = await json<{
      token: string;
      sessions: number;
      sessionIds?: unknown;
      kvCellsUsed: number;
      queued: number;
    }>(c.req.raw);
    const node = await nameOf(b.token);
    const r = await tracker.heartbeat({
      token: o.nodeToken,
      node,
      sessions: b.sessions,
      // a page without the list sends none: the tracker then counts `sessions`
      sessionIds: Array.isArray(b.sessionIds) ? b.sessionIds.filter((s) => typeof s === "string") : [],
      kvCellsUsed: b.kvCellsUsed,
      queued: b.queued,
    }, { timeoutMs: 5000 });
    return c.json({ known: r.known, admission: r.admission });
  });

  // sent with navigator.sendBeacon as the tab goes away: the body is the token
  app.post("/volunteer/api/leave", async (c) => {
    const node = await nameOf((await c.req.text()).trim());
    const r = await tracker.leave({ token: o.nodeToken, node }, { timeoutMs: 5000 });
    log.info("volunteer left", { node, known: r.known });
    return c.json({ known: r.known });
  });
}
