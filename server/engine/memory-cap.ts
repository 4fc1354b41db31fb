// What a Deno process adds to the memory cap (src/engine/memory-cap.ts): the default for each
// engine (the machine's available memory, or what a WASM module can address), and the check of
// a model file's range from the file's header alone, before any weight is read.
import { existsSync } from "node:fs";
import {
  checkMemoryCap,
  defaultPool,
  headerModel,
  type RangeMemory,
  type RangeModel,
  type SpecBudget,
} from "../../src/engine/memory-cap.ts";
import { WASM32_MEMORY_CAP, WASM64_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";
import { readGgufHeader } from "../../src/gguf/read-header.ts";

export type CapEngine = "native" | "wasm32" | "wasm64";

/** What the engine can address at most: a WASM module's memory; none for native. */
export function addressLimit(engine: CapEngine): number {
  return engine === "wasm64" ? WASM64_MEMORY_CAP : engine === "wasm32" ? WASM32_MEMORY_CAP : Infinity;
}

/**
 * The cap a node runs with: the one asked for (never past what a WASM engine can address),
 * else the machine's available memory (MemAvailable) for native, the address space for WASM.
 */
export function nodeMemoryCap(engine: CapEngine, asked?: number): number {
  const fallback = engine === "native" ? Deno.systemMemoryInfo().available : addressLimit(engine);
  return Math.min(asked ?? fallback, addressLimit(engine));
}

/** A model file's facts from its header alone; undefined for a file the estimate cannot read
 *  (missing, or not a GGUF: the loader says what is wrong with it). */
async function fileModel(path: string): Promise<RangeModel | undefined> {
  try {
    const [header, stat] = await Promise.all([readGgufHeader(await Deno.open(path)), Deno.stat(path)]);
    return headerModel(header, stat.size);
  } catch {
    return undefined;
  }
}

/**
 * EngineError over_memory_cap when the spec's range of the model file passes capBytes
 * (0: no cap); reads only the header. A missing or unreadable file is left to the loader.
 */
export async function checkFileMemory(
  spec: SpecBudget & { readonly modelPath: string },
  o: { readonly capBytes: number; readonly flashAttention: boolean },
): Promise<RangeMemory | undefined> {
  if (o.capBytes <= 0 || !existsSync(spec.modelPath)) return undefined;
  const model = await fileModel(spec.modelPath);
  return model && checkMemoryCap(model, spec, o);
}

/** The KV pool a node makes without --kv-cells (defaultPool), for a range of a model file or
 *  of an artifact's manifest; 8192 cells for a file whose header the estimate cannot read. */
export async function nodeDefaultPool(
  source: { readonly modelPath: string } | { readonly model: RangeModel },
  spec: Omit<SpecBudget, "kvCells">,
  o: { readonly capBytes: number; readonly flashAttention: boolean },
): Promise<number> {
  const model = "model" in source ? source.model : await fileModel(source.modelPath);
  return model ? defaultPool(model, spec, o) : 8192;
}
