// RangeEngine on the WebAssembly build of the same fork and the same flat C API
// (vendor/llama.cpp/api/strata.h), for browsers, Deno and Node alike: StrataEngine over
// WasmCalls. The runtime hands over an instantiated module and the model's bytes; nothing
// here touches a file system of the host.
import { EngineError } from "../errors.ts";
import { contextFlags, type ShardSpec } from "../range-engine.ts";
import { engineRecipe } from "../recipe.ts";
import { loadModel, openContext, type Opened, StrataEngine } from "../strata-engine.ts";
import { presentBytes, type SparseModel } from "../../artifact/sparse.ts";
import { rangeFile } from "../../artifact/compact-shard.ts";
import { parseGgufHeader } from "../../gguf/reader.ts";
import { checkMemoryCap, headerModel, type RangeModel } from "../memory-cap.ts";
import { WasmAbi } from "./abi.ts";
import { placeModel } from "./model-file.ts";
import type { StrataModule } from "./strata-module.ts";
import { WasmCalls } from "./wasm-calls.ts";

export type { StrataModule } from "./strata-module.ts";

/** wasm32 addresses at most 4 GiB, and the engine needs room beyond the weights. */
export const WASM32_MEMORY_CAP = 4 * 2 ** 30;
/** what a wasm64 build is linked with (server/build/wasm.ts: STRATA_WASM_MAX_MEMORY) */
export const WASM64_MEMORY_CAP = 16 * 2 ** 30;

/** How a module was built: wasm64 passes pointers as BigInt and has a larger cap. */
export interface WasmLoadOptions {
  /** the module's maximum memory (default: wasm32's 4 GiB) */
  memoryCap?: number;
  /** the WebGPU flavor: exports may suspend on GPU waits */
  suspends?: boolean;
  memory64?: boolean;
}

/**
 * pthread workers the build starts with each module (STRATA_WASM_MAX_THREADS): ggml
 * starts its threads on every graph, and a page's main thread cannot wait for a worker
 * that does not exist yet, so more threads than this are never asked for.
 */
export const WASM_MAX_THREADS = 4;

const gib = (n: number) => n / 2 ** 30;

/**
 * The model's facts from the GGUF header at the start of its bytes (a sparse download's
 * first span); undefined when it does not parse: the loader then says what is wrong.
 */
function modelFacts(file: Uint8Array | SparseModel): RangeModel | undefined {
  const size = file instanceof Uint8Array ? file.length : file.size;
  const start = file instanceof Uint8Array
    ? file
    : file.spans[0]?.offset === 0
    ? file.spans[0].bytes
    : undefined;
  try {
    return start && headerModel(parseGgufHeader(start, { fileSize: size }), size);
  } catch {
    return undefined;
  }
}

export class WasmEngine extends StrataEngine<number> {
  readonly kind = "wasm" as const;

  /**
   * Loads a range from the model's bytes (whole, or a shard's sparse download), placed in
   * the module's in-memory file system (outside the wasm heap). Refuses before allocating
   * when those bytes alone pass the module's memory, or the range's weights, KV and compute
   * pass it or the spec's memory cap. The recipe is the module's .wasm bytes' and backend's.
   */
  static async load(
    m: StrataModule,
    file: Uint8Array | SparseModel,
    spec: ShardSpec,
    o: WasmLoadOptions = {},
  ): Promise<WasmEngine> {
    // what the heap must take in: the whole file, or a shard's present spans
    const heapBytes = file instanceof Uint8Array ? file.length : presentBytes(file);
    const memoryCap = o.memoryCap ?? WASM32_MEMORY_CAP;
    if (heapBytes >= memoryCap) {
      throw new EngineError(
        "load_failed",
        `a ${gib(heapBytes).toFixed(2)} GiB model file passes this engine's ${gib(memoryCap)} GiB memory`,
      );
    }
    // the range's weights, KV and compute must fit what the module addresses and the
    // participant's cap, decided from the header before the loader reads anything
    const gpuLayers = spec.gpuLayers ?? 0;
    const facts = modelFacts(file);
    if (facts) {
      checkMemoryCap(facts, spec, {
        capBytes: Math.min(spec.memoryCapBytes || Infinity, memoryCap),
        // fused attention on CPU and on WebGPU alike (its gathered kernel runs on every adapter)
        flashAttention: true,
      });
    }
    if (spec.threads < 1 || spec.threads > WASM_MAX_THREADS) {
      throw new EngineError(
        "bad_input",
        `the WASM engine runs 1 to ${WASM_MAX_THREADS} threads, not ${spec.threads}`,
      );
    }
    if (!m.wasmBinary) {
      throw new EngineError("load_failed", "the module was instantiated without its .wasm bytes");
    }
    const calls = new WasmCalls(m, new WasmAbi(m, o.memory64 ?? false, o.suspends ?? false));
    const path = `/models/${spec.modelPath.split("/").pop() || "model.gguf"}`;
    m.FS.mkdirTree("/models");
    // wasm32 llama.cpp cannot open an artifact whose data passes 4 GiB: a range loads from
    // a shard file of its own (views of the same bytes)
    placeModel(m, path, spec.range === "whole" ? file : rangeFile(file, spec.range) ?? file);
    let model: number;
    try {
      model = await loadModel(calls, path, spec.range, gpuLayers, false);
    } finally {
      m.FS.unlink(path); // the loader has read what the range needs
    }
    const opened = await openContext(calls, model, spec, contextFlags(spec));
    const backend = gpuLayers > 0 ? "wasm-webgpu" : "wasm-cpu";
    return new WasmEngine(calls, opened, backend, await engineRecipe(m.wasmBinary, backend), spec, m);
  }

  private constructor(
    calls: WasmCalls,
    opened: Opened<number>,
    backend: string,
    recipe: Uint8Array,
    spec: ShardSpec,
    private readonly m: StrataModule,
  ) {
    super(calls, opened, backend, recipe, spec);
  }

  /** Awaited GPU waits so far (WebGPU flavor): a benchmark divides them by decode steps. */
  gpuWaits(): number | undefined {
    const s = this.m.webgpuStats;
    return s ? s.mapWaits + s.workDoneWaits : undefined;
  }
}
