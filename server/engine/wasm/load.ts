// The WASM engine under Deno: each engine in a worker of its own (one module instance,
// its own memory and pthread workers), so a node's event loop never computes; the range's
// bytes of the model read from disk and moved there.
import type { ShardSpec } from "../../../src/engine/range-engine.ts";
import { instantiateStrata as instantiateWith } from "../../../src/engine/wasm/load-engine.ts";
import type { StrataModule } from "../../../src/engine/wasm/strata-module.ts";
import type { WasmFlavor } from "../../../src/engine/wasm/wasm-files.ts";
import { WorkerEngine } from "../../../src/engine/wasm/worker-engine.ts";
import { WASM64_MEMORY_CAP } from "../../../src/engine/wasm/wasm-engine.ts";
import { log } from "../../log/log.ts";
import { cacheDir } from "../../process/paths.ts";
import { addressLimit, checkFileMemory } from "../memory-cap.ts";
import type { WasmBuildOptions } from "../../build/wasm.ts";
import { cachedWasmFiles } from "./cache-files.ts";
import { readRangeBytes } from "../../model/range-bytes.ts";
import { moduleWorkersOnly } from "./module-workers.ts";

const engineLog = () => Boolean(Deno.env.get("STRATA_ENGINE_LOG"));

/** A module instance on this thread, for what drives one directly (the smoke check, tests). */
export function instantiateStrata(
  flavor: WasmFlavor = "cpu",
  build: WasmBuildOptions = {},
): Promise<StrataModule> {
  moduleWorkersOnly();
  return instantiateWith(cachedWasmFiles(build), flavor, { engineLog: engineLog() });
}

/**
 * mesa's Vulkan driver (lavapipe, behind Deno's WebGPU) prints an error on every start
 * when XDG_RUNTIME_DIR is unset, as it is in services and CI: give it a private one.
 */
function quietVulkan(): void {
  if (Deno.env.get("XDG_RUNTIME_DIR")) return;
  const dir = cacheDir("xdg-runtime");
  Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
  Deno.env.set("XDG_RUNTIME_DIR", dir);
}

/**
 * Loads a range on WASM CPU, or on WebGPU when asked and Deno's adapter (which workers
 * see too) can run ggml's WebGPU backend; when it cannot, one warning says why and the
 * engine runs on CPU.
 */
export async function loadWasmEngine(
  spec: ShardSpec,
  o: { webgpu?: boolean } & WasmBuildOptions = {},
): Promise<WorkerEngine> {
  // before the file is read: the module checks again, with what it can address
  const capBytes = Math.min(spec.memoryCapBytes || Infinity, addressLimit(o.memory64 ? "wasm64" : "wasm32"));
  // fused attention on CPU and on WebGPU alike (its gathered kernel runs on every adapter)
  await checkFileMemory(spec, { capBytes, flashAttention: true });
  if (o.webgpu) quietVulkan();
  const worker = new Worker(new URL("./engine-worker.ts", import.meta.url), { type: "module" });
  const { engine, fallback } = await WorkerEngine.start(worker, cachedWasmFiles({ memory64: o.memory64 }), {
    spec,
    // the header and the range's tensors only: no process of a route holds the whole model
    model: await readRangeBytes(spec.modelPath, spec.range),
    webgpu: o.webgpu,
    ...(o.memory64 ? { memory64: true, memoryCap: WASM64_MEMORY_CAP } : {}),
    engineLog: engineLog(),
  });
  if (fallback) log.warn("engine.fallback", { line: fallback });
  return engine;
}
