// The volunteer side of the gateway: the page a person opens to host a shard in their tab,
// its bundle and the WASM engine, and the small JSON API the tab uses to learn its
// assignment, get a relay identity, and join, renew and leave the tracker. The tab reaches
// the tracker only through here (browsers speak neither h2c nor the node token).
import type { Hono } from "hono";
import { join } from "node:path";
import type { ArtifactManifest } from "../../src/artifact/pieces.ts";
import { formatRange, type LayerRange, layerRange } from "../../src/engine/layer-range.ts";
import { WASM32_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";
import { peerToken, verifyPeerToken } from "../../src/relay/token.ts";
import { relayHopUrl } from "../../src/route/hop-url.ts";
import { TrackerError } from "../../src/tracker/errors.ts";
import {
  offeredRanges,
  TAB_ENGINE,
  volunteerAssignment,
  type VolunteerModel,
} from "../../src/tracker/volunteer-assignment.ts";
import { toBase64 } from "../../src/bytes/base64.ts";
import { ApiError } from "../../src/gateway/openai.ts";
import { hexToBytes } from "../../src/bytes/hex.ts";
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
  /** the ranges volunteers are offered; none: the tracker places each tab */
  readonly split: readonly LayerRange[];
}

export async function volunteerRoutes(
  app: Hono,
  o: VolunteerOptions,
  m: VolunteerModel & { readonly manifest: ArtifactManifest },
  tracker: ReturnType<typeof trackerClient>["client"],
  /** the artifact URL tabs download from (default: this gateway's own /artifacts) */
  artifactUrl?: string,
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
  // the core's errors as HTTP: a malformed ask is the tab's mistake (400); no range that
  // fits its engine is a conflict (409)
  const apiError = (e: unknown) =>
    e instanceof TrackerError ? new ApiError(e.code === "invalid_argument" ? 400 : 409, e.message) : e;
  app.get("/volunteer/api/assignment", async (c) => {
    try {
      const capBytes = Math.min(Number(c.req.query("memoryCap")) || WASM32_MEMORY_CAP, WASM32_MEMORY_CAP);
      const layers = c.req.query("layers");
      const candidates = o.split.length === 0 && !layers
        ? [await placeTab(tracker, o.nodeToken, m.manifest, capBytes)]
        : offeredRanges(o.split, layers, m.manifest.nLayer);
      const { nodes } = await tracker.nodes({}, { timeoutMs: 5000 });
      return c.json(volunteerAssignment(m, {
        candidates,
        capBytes,
        nodes,
        artifactUrl: artifactUrl ?? `${new URL(c.req.url).origin}/artifacts/${m.manifest.artifact}`,
      }));
    } catch (e) {
      throw apiError(e);
    }
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
      artifactUrl?: string;
    }>(c.req.raw);
    const name = await nameOf(b.token);
    // a tab serves its pieces through the relay, under its own name only
    const own = relayHopUrl(o.relayUrl, name);
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
        artifactUrl: b.artifactUrl === own ? own : "",
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
      decodeTokensPerS?: unknown;
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
      // the tracker takes only a finite positive rate
      decodeTokensPerS: typeof b.decodeTokensPerS === "number" ? b.decodeTokensPerS : 0,
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

/**
 * A tab's range from the tracker's placement. The tab gets its name (and registers) later: the
 * placement holds the range under a name of the ask's own for one lease, then counts the tab
 * by what it registered.
 */
async function placeTab(
  tracker: ReturnType<typeof trackerClient>["client"],
  nodeToken: string,
  manifest: ArtifactManifest,
  capBytes: number,
): Promise<LayerRange> {
  try {
    const r = await tracker.place({
      token: nodeToken,
      node: `tab-ask-${crypto.randomUUID().slice(0, 8)}`,
      artifactSha256: hexToBytes(manifest.artifact),
      memoryCapBytes: BigInt(capBytes),
      engine: "wasm-cpu",
      kvCells: TAB_ENGINE.kvCells,
      maxSessions: TAB_ENGINE.maxSessions,
      batchTokens: TAB_ENGINE.batchTokens,
      batchInvariant: true,
      // a tab may run on WebGPU, where attention may not be fused
      flashAttention: false,
    }, { timeoutMs: 10_000 });
    return layerRange(r.range!.start, r.range!.end, manifest.nLayer);
  } catch (e) {
    throw new TrackerError(
      "resource_exhausted",
      `no range for this tab: ${e instanceof Error ? e.message : e}`,
    );
  }
}
