// The WASM engine under Deno: one module instance per engine (each has its own memory
// and its own pthread workers), the model's bytes read from disk and handed over.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { ShardSpec } from "../../../src/engine/range-engine.ts";
import { type StrataModule, WasmEngine } from "../../../src/engine/wasm/wasm-engine.ts";
import { chooseWasmBackend, type GpuLike } from "../../../src/engine/wasm/webgpu-support.ts";
import { log } from "../../util/log.ts";
import { ensureWasmEngine, type WasmFlavor } from "./build.ts";

/**
 * Emscripten starts its pthread workers as classic scripts; Deno only runs module
 * workers, and the generated worker loads the main module with import(), so forcing
 * the type is all it takes.
 */
function moduleWorkersOnly(): void {
  const g = globalThis as { Worker: typeof Worker; strataModuleWorkers?: true };
  if (g.strataModuleWorkers) return;
  const Base = g.Worker;
  g.Worker = class extends Base {
    constructor(url: string | URL, options?: WorkerOptions) {
      super(url, { ...options, type: "module" });
    }
  };
  g.strataModuleWorkers = true;
}

export async function instantiateStrata(flavor: WasmFlavor = "cpu"): Promise<StrataModule> {
  const dir = await ensureWasmEngine(flavor);
  moduleWorkersOnly();
  const { default: createStrata } = await import(pathToFileURL(join(dir, "strata.mjs")).href);
  return await createStrata({
    wasmBinary: await Deno.readFile(join(dir, "strata.wasm")),
    // llama.cpp's own log goes to stderr; quiet unless asked
    print: () => {},
    printErr: Deno.env.get("STRATA_ENGINE_LOG") ? (s: string) => console.error(s) : () => {},
  }) as StrataModule;
}

/**
 * Loads a range on WASM CPU, or on WebGPU when asked and Deno's adapter can run ggml's
 * WebGPU backend; when it cannot, one warning says why and the engine runs on CPU.
 */
export async function loadWasmEngine(spec: ShardSpec, o: { webgpu?: boolean } = {}): Promise<WasmEngine> {
  let flavor: WasmFlavor = "cpu";
  if (o.webgpu) {
    const choice = await chooseWasmBackend((navigator as unknown as { gpu?: GpuLike }).gpu);
    if (choice.use === "webgpu") flavor = "webgpu";
    else {log.warn("engine.fallback", {
        line: `engine: WebGPU unavailable, running on WASM CPU: ${choice.reason}`,
      });}
  }
  const [m, bytes] = await Promise.all([instantiateStrata(flavor), Deno.readFile(spec.modelPath)]);
  return WasmEngine.load(m, bytes, { ...spec, gpuLayers: flavor === "webgpu" ? 999 : 0 });
}
