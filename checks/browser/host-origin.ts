// The loopback origin that shard tabs load from: the host page, its bundle, the WASM
// engine's files and one model, all with the cross-origin isolation headers that
// SharedArrayBuffer (and so the engine's pthreads) requires.
import { Hono } from "hono";
import { join } from "node:path";
import { engineFileRoutes, ISOLATION_HEADERS } from "../../server/browser/engine-files.ts";
import { repoRoot } from "../../server/process/paths.ts";
import { bundleWebEntry } from "../../server/browser/bundle.ts";

export interface HostOrigin {
  readonly url: string;
  close(): Promise<void>;
}

export async function serveHostOrigin(modelPath: string): Promise<HostOrigin> {
  const bundle = await bundleWebEntry("checks/browser/engine-tab/main.ts");
  const page = await Deno.readTextFile(join(repoRoot, "checks", "browser", "engine-tab", "index.html"));

  const app = new Hono();
  app.use(async (c, next) => {
    await next();
    for (const [k, v] of Object.entries(ISOLATION_HEADERS)) c.header(k, v);
    c.header("Cache-Control", "no-store");
  });
  app.get("/", (c) => c.html(page));
  app.get("/engine-tab.js", (c) => c.body(bundle, 200, { "Content-Type": "text/javascript" }));
  engineFileRoutes(app, "/engine");
  app.get("/model", async (c) => {
    const file = await Deno.open(modelPath);
    const { size } = await file.stat();
    return c.body(file.readable, 200, {
      "Content-Type": "application/octet-stream",
      "Content-Length": String(size),
    });
  });

  const ac = new AbortController();
  const { promise: listening, resolve } = Promise.withResolvers<Deno.NetAddr>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen: (a) => resolve(a as Deno.NetAddr) },
    app.fetch,
  );
  const addr = await listening;
  return {
    url: `http://127.0.0.1:${addr.port}`,
    close: async () => {
      ac.abort();
      await server.finished;
    },
  };
}
