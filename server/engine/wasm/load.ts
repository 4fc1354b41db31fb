// The WASM engine under Deno: one module instance per engine (each has its own memory
// and its own pthread workers), the model's bytes read from disk and handed over.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { ShardSpec } from "../../../src/engine/range-engine.ts";
import { type StrataModule, WasmEngine } from "../../../src/engine/wasm/wasm-engine.ts";
import { runtimeGpu, wasmFlavorFor } from "../../../src/engine/wasm/webgpu-support.ts";
import { log } from "../../log/log.ts";
import { cacheDir } from "../../paths.ts";
import { ensureWasmEngine, WASM64_MEMORY_CAP, type WasmBuildOptions, type WasmFlavor } from "./build.ts";

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

export async function instantiateStrata(
  flavor: WasmFlavor = "cpu",
  build: WasmBuildOptions = {},
): Promise<StrataModule> {
  // STRATA_WASM_DIR: a module not (yet) in the cache, as the build's smoke check loads it
  const dir = Deno.env.get("STRATA_WASM_DIR") ?? await ensureWasmEngine(flavor, build);
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
 * Loads a range on WASM CPU, or on WebGPU when asked and Deno's adapter can run ggml's
 * WebGPU backend; when it cannot, one warning says why and the engine runs on CPU.
 */
export async function loadWasmEngine(
  spec: ShardSpec,
  o: { webgpu?: boolean } & WasmBuildOptions = {},
): Promise<WasmEngine> {
  const build = { memory64: o.memory64 };
  const abi = o.memory64 ? { memory64: true, memoryCap: WASM64_MEMORY_CAP } : {};
  const bytes = await Deno.readFile(spec.modelPath);
  if (o.webgpu) quietVulkan();
  const choice = o.webgpu ? await wasmFlavorFor(runtimeGpu()) : undefined;
  if (choice?.flavor === "cpu") log.warn("engine.fallback", { line: choice.fallback });
  if (choice?.flavor === "webgpu") {
    try {
      return await WasmEngine.load(await instantiateStrata("webgpu", build), bytes, {
        ...spec,
        gpuLayers: 999,
      }, {
        ...abi,
        suspends: true,
      });
    } catch (err) {
      // the adapter passed the feature check but the backend still refused the device
      const reason = err instanceof Error ? err.message : String(err);
      log.warn("engine.fallback", { line: `engine: WebGPU load failed, running on WASM CPU: ${reason}` });
    }
  }
  return await WasmEngine.load(await instantiateStrata("cpu", build), bytes, { ...spec, gpuLayers: 0 }, abi);
}
