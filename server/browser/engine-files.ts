// The WASM engine's files for pages (shard tabs, the volunteer page): each flavor built on
// its first request, so a tab whose adapter cannot run WebGPU never asks for that build;
// and the worker the engine computes in (web/host/engine-worker.ts, bundled once).
import type { Hono } from "hono";
import { join } from "node:path";
import { ensureWasmEngine, WASM_FLAVORS, type WasmFlavor } from "../build/wasm.ts";
import { bundleWebEntry } from "./bundle.ts";

const ENGINE_FILES: Record<string, string> = {
  "strata.mjs": "text/javascript",
  "strata.worker.js": "text/javascript",
  "strata.wasm": "application/wasm",
};

/** GET {prefix}/worker.js and {prefix}/:flavor/:file (web/host/engine.ts) */
export function engineFileRoutes(app: Hono, prefix: string): void {
  let worker: Promise<string> | undefined;
  app.get(`${prefix}/worker.js`, async (c) => {
    worker ??= bundleWebEntry("web/host/engine-worker.ts");
    return c.body(await worker, 200, { "Content-Type": "text/javascript" });
  });
  const dirs = new Map<WasmFlavor, Promise<string>>();
  const dir = (f: WasmFlavor) => {
    if (!dirs.has(f)) dirs.set(f, ensureWasmEngine(f));
    return dirs.get(f)!;
  };
  app.get(`${prefix}/:flavor/:file`, async (c) => {
    const flavor = c.req.param("flavor") as WasmFlavor;
    const type = ENGINE_FILES[c.req.param("file")];
    if (!type || !WASM_FLAVORS.includes(flavor)) return c.notFound();
    const file = await Deno.open(join(await dir(flavor), c.req.param("file")));
    return c.body(file.readable, 200, { "Content-Type": type });
  });
}

/** SharedArrayBuffer (the engine's pthreads) needs a cross-origin isolated page. */
export const ISOLATION_HEADERS = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
} as const;
