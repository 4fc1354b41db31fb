// The loopback origin that shard tabs load from: the host page, its bundle, the WASM
// engine's files and one model, all with the cross-origin isolation headers that
// SharedArrayBuffer (and so the engine's pthreads) requires.
import { Hono } from "hono";
import { join } from "node:path";
import { ensureWasmEngine, WASM_FLAVORS, type WasmFlavor } from "../engine/wasm/build.ts";
import { repoRoot } from "../util/paths.ts";
import { bundleWebEntry } from "./bundle.ts";

const ENGINE_FILES: Record<string, string> = {
  "strata.mjs": "text/javascript",
  "strata.worker.js": "text/javascript",
  "strata.wasm": "application/wasm",
};

export interface ShardOrigin {
  readonly url: string;
  close(): Promise<void>;
}

export async function serveShardOrigin(modelPath: string): Promise<ShardOrigin> {
  // a flavor is built on its first request: a tab whose adapter cannot run WebGPU never asks
  const engineDirs = new Map<WasmFlavor, Promise<string>>();
  const engineDir = (f: WasmFlavor) => {
    if (!engineDirs.has(f)) engineDirs.set(f, ensureWasmEngine(f));
    return engineDirs.get(f)!;
  };
  const bundle = await bundleWebEntry("shard-host/main.ts");
  const page = await Deno.readTextFile(join(repoRoot, "web", "shard-host", "index.html"));

  const app = new Hono();
  app.use(async (c, next) => {
    await next();
    c.header("Cross-Origin-Opener-Policy", "same-origin");
    c.header("Cross-Origin-Embedder-Policy", "require-corp");
    c.header("Cache-Control", "no-store");
  });
  app.get("/", (c) => c.html(page));
  app.get("/shard-host.js", (c) => c.body(bundle, 200, { "Content-Type": "text/javascript" }));
  app.get("/engine/:flavor/:file", async (c) => {
    const flavor = c.req.param("flavor") as WasmFlavor;
    const type = ENGINE_FILES[c.req.param("file")];
    if (!type || !WASM_FLAVORS.includes(flavor)) return c.notFound();
    const file = await Deno.open(join(await engineDir(flavor), c.req.param("file")));
    return c.body(file.readable, 200, { "Content-Type": type });
  });
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
