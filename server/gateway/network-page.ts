// The gateway's network page (/network/): every node as a bar over the model's layers, the
// coverage with its gaps and thin spots, the routes in use and placement moves as they happen,
// from what the tracker knows, looked at once a second; and charts of the gateway's load over
// the last minutes.
import type { Hono } from "hono";
import { join } from "node:path";
import type { ActiveRoutes } from "../../src/gateway/active-routes.ts";
import type { LoadHistory } from "../../src/gateway/load-history.ts";
import type { NetworkState } from "../../src/gateway/network-view.ts";
import { type RangeModel, shardMemory } from "../../src/engine/memory-cap.ts";
import type { trackerClient } from "../../node-apis/tracker/client.ts";
import { bundleWebEntry } from "../browser/bundle.ts";
import { repoRoot } from "../process/paths.ts";
import { bytesToHex } from "../../src/bytes/hex.ts";

export async function networkPageRoutes(
  app: Hono,
  o: {
    readonly model: RangeModel & { readonly name: string };
    readonly tracker: ReturnType<typeof trackerClient>["client"];
    readonly routes: ActiveRoutes;
    readonly history: LoadHistory;
  },
): Promise<void> {
  const [page, bundle, chartCss] = await Promise.all([
    Deno.readTextFile(join(repoRoot, "web", "network", "index.html")),
    bundleWebEntry("web/network/main.ts"),
    // the charting library's own stylesheet
    Deno.readTextFile(join(repoRoot, "node_modules", "uplot", "dist", "uPlot.min.css")),
  ]);
  app.get("/network/uplot.css", (c) => c.body(chartCss, 200, { "Content-Type": "text/css" }));
  // the last ten minutes, a point a second (the charts)
  app.get("/network/api/load", (c) => c.json(o.history.series(Date.now())));
  app.get("/network", (c) => c.redirect("/network/"));
  app.get("/network/", (c) => c.html(page));
  app.get("/network/main.js", (c) => c.body(bundle, 200, { "Content-Type": "text/javascript" }));
  app.get("/network/api/state", async (c) => {
    const { nodes, routePublicKey } = await o.tracker.nodes({}, { timeoutMs: 5000 });
    const m = o.model.manifest;
    const state: NetworkState = {
      model: { name: o.model.name, nLayer: m.nLayer, artifact: m.artifact },
      nodes: nodes.filter((n) => n.shard?.range).map((n) => {
        const s = n.shard!;
        const range = { start: s.range!.start, end: s.range!.end };
        // the least its range takes with its settings (one token of compute, as the tracker counts)
        const need = shardMemory(o.model, range, s.kvCells, {
          maxSequences: s.maxSessions,
          batchTokens: 1,
          batchInvariant: s.sessionCells > 0 && s.sessionCells < s.kvCells,
          flashAttention: true,
        });
        return {
          node: n.node,
          ...range,
          engine: s.engine,
          live: n.live,
          admission: n.admission,
          capBytes: Number(s.memoryCapBytes),
          needBytes: need.total,
          tokensPerS: s.decodeTokensPerS,
          sessions: n.sessions,
        };
      }),
      routeKey: bytesToHex(routePublicKey),
      routes: o.routes.snapshot(),
      at: Date.now(),
    };
    return c.json(state);
  });
}
