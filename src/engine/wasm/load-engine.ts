// The one WASM loader, for every host: the build's files from the host (WasmFiles), the
// flavor by what this runtime's WebGPU offers, one module instance per engine (its own
// memory and pthread workers), the range loaded. WebGPU that cannot run falls back to
// CPU, with one line saying why.
import type { SparseModel } from "../../artifact/sparse.ts";
import type { ShardSpec } from "../range-engine.ts";
import type { StrataModule } from "./strata-module.ts";
import type { WasmFiles, WasmFlavor } from "./wasm-files.ts";
import { WasmEngine } from "./wasm-engine.ts";
import { runtimeGpu, wasmFlavorFor } from "./webgpu-support.ts";

export interface WasmEngineRequest {
  readonly spec: ShardSpec;
  /** the model's bytes: the whole file, or a shard's sparse download */
  readonly model: Uint8Array | SparseModel;
  /** WebGPU when this runtime's adapter can run ggml's backend, else CPU (gpuLayers is decided here) */
  readonly webgpu?: boolean;
  /** the wasm64 build (its files are the host's to pick) and its cap */
  readonly memory64?: boolean;
  readonly memoryCap?: number;
  /** llama.cpp's own log lines to stderr (quiet otherwise) */
  readonly engineLog?: boolean;
}

export interface LoadedWasm<E> {
  readonly engine: E;
  /** the line saying why WebGPU was asked for and CPU runs, if so */
  readonly fallback?: string;
}

/** A fresh module instance of one flavor, given its .wasm bytes (kept as its wasmBinary). */
export async function instantiateStrata(
  files: WasmFiles,
  flavor: WasmFlavor,
  o: { engineLog?: boolean } = {},
): Promise<StrataModule> {
  const { moduleUrl, wasm } = await files.files(flavor);
  const { default: createStrata } = await import(/* @vite-ignore */ moduleUrl);
  return await createStrata({
    wasmBinary: wasm,
    print: () => {},
    printErr: o.engineLog ? (s: string) => console.error(s) : () => {},
  }) as StrataModule;
}

async function loadFlavor(files: WasmFiles, flavor: WasmFlavor, r: WasmEngineRequest): Promise<WasmEngine> {
  const m = await instantiateStrata(files, flavor, r);
  const gpu = flavor === "webgpu";
  return await WasmEngine.load(m, r.model, { ...r.spec, gpuLayers: gpu ? 999 : 0 }, {
    memory64: r.memory64,
    memoryCap: r.memoryCap,
    suspends: gpu,
  });
}

/** On this thread; nodes and tabs run it in the engine's worker (WorkerEngine). */
export async function loadWasmEngineFrom(
  files: WasmFiles,
  r: WasmEngineRequest,
): Promise<LoadedWasm<WasmEngine>> {
  if (!r.webgpu) return { engine: await loadFlavor(files, "cpu", r) };
  const choice = await wasmFlavorFor(runtimeGpu());
  if (choice.flavor === "cpu") {
    return { engine: await loadFlavor(files, "cpu", r), fallback: choice.fallback };
  }
  try {
    return { engine: await loadFlavor(files, "webgpu", r) };
  } catch (err) {
    // the adapter passed the feature check but the backend still refused the device
    const reason = err instanceof Error ? err.message : String(err);
    const fallback = `engine: WebGPU load failed, running on WASM CPU: ${reason}`;
    return { engine: await loadFlavor(files, "cpu", r), fallback };
  }
}
