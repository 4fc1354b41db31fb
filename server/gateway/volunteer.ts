// The volunteer side of the gateway: the page a person opens to host a shard in their tab,
// its bundle and the WASM engine, the model's facts and a relay identity for the tab, and the
// tracker's own Connect service, which the tab calls through here (browsers speak neither h2c
// nor hold the node token): volunteer-tracker.ts.
import type { Hono } from "hono";
import { join } from "node:path";
import type { ArtifactManifest } from "../../src/artifact/pieces.ts";
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { peerToken } from "../../src/relay/token.ts";
import type {
  VolunteerConfig,
  VolunteerIdentity,
  VolunteerModel,
} from "../../src/tracker/placement/volunteer-assignment.ts";
import { bundleWebEntry } from "../browser/bundle.ts";
import { engineFileRoutes, ISOLATION_HEADERS } from "../browser/engine-files.ts";
import type { trackerClient } from "../../node-apis/tracker/client.ts";
import { repoRoot } from "../process/paths.ts";
import { VOLUNTEER_CONNECT_PATH, volunteerTrackerRoutes } from "./volunteer-tracker.ts";

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

  const artifactUrlFor = (req: string) =>
    artifactUrl ?? `${new URL(req).origin}/artifacts/${m.manifest.artifact}`;
  // what the page needs of the model to reckon a range's memory, and where things are: the
  // rest (placement, the nodes, joining) it asks the tracker's own service, below
  app.get("/volunteer/config", (c) =>
    c.json(
      {
        model: m.name,
        artifact: m.manifest.artifact,
        kv: m.kv,
        graph: m.graph,
        artifactUrl: artifactUrlFor(c.req.url),
        relayUrl: o.relayUrl,
        split: o.split.map((r) => ({ start: r.start, end: r.end })),
        trackerPath: VOLUNTEER_CONNECT_PATH,
      } satisfies VolunteerConfig,
    ));
  // a tab's relay identity: its name, inside an HMAC token the relay and this gateway verify
  app.post("/volunteer/identity", async (c) => {
    const name = `vol-${crypto.randomUUID().slice(0, 8)}`;
    return c.json({ name, token: await peerToken(o.relaySecret, name) } satisfies VolunteerIdentity);
  });
  volunteerTrackerRoutes(app, tracker, {
    relayUrl: o.relayUrl,
    relaySecret: o.relaySecret,
    nodeToken: o.nodeToken,
    artifact: m.manifest.artifact,
  });
}
