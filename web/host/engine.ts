// A page's WASM engine: its worker script and the engine's files come from one base URL of
// the page's origin ({base}/worker.js, {base}/{flavor}/strata.mjs …, as
// server/browser/engine-files.ts serves them), and the engine computes in that worker.
import type { LoadedWasm, WasmEngineRequest } from "../../src/engine/wasm/load-engine.ts";
import { servedWasmFiles } from "../../src/engine/wasm/wasm-files.ts";
import { WorkerEngine } from "../../src/engine/wasm/worker-engine.ts";

/** base: an absolute URL, e.g. new URL("/volunteer/engine", location.href) */
export function loadEngine(base: URL, r: WasmEngineRequest): Promise<LoadedWasm<WorkerEngine>> {
  const dir = `${base.href.replace(/\/$/, "")}/`;
  const worker = new Worker(new URL("worker.js", dir), { type: "module" });
  return WorkerEngine.start(worker, servedWasmFiles(base), r);
}
