// Node's engine: the WASM build from a folder, through the one loader, on this thread (Node
// has no web Worker to give it); never more than a wasm32 module addresses.
import { readFileSync } from "node:fs";
import type { ShardSpec } from "../../src/engine/range-engine.ts";
import { loadWasmEngineFrom } from "../../src/engine/wasm/load-engine.ts";
import { WASM32_MEMORY_CAP, type WasmEngine } from "../../src/engine/wasm/wasm-engine.ts";
import { folderWasmFiles } from "../../node-apis/wasm/folder-files.ts";

/** The cap a node runs with: the one asked for (0: none asked), never past wasm32's. */
export const engineMemoryCap = (asked?: number): number =>
  Math.min(asked || WASM32_MEMORY_CAP, WASM32_MEMORY_CAP);

/** The model file's bytes (the artifact is their hash) and the engine loaded from them. */
export async function loadEngine(
  spec: ShardSpec,
  wasmDir: string,
): Promise<{ engine: WasmEngine; model: Uint8Array }> {
  const model = new Uint8Array(readFileSync(spec.modelPath));
  const { engine } = await loadWasmEngineFrom(folderWasmFiles(wasmDir), { spec, model });
  return { engine, model };
}
