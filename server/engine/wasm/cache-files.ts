// The WASM engine's files under Deno: a flavor's folder in the build cache, built on its
// first use (so a node whose adapter cannot run WebGPU never builds that flavor).
import type { WasmFiles } from "../../../src/engine/wasm/wasm-files.ts";
import { ensureWasmEngine, type WasmBuildOptions } from "../../build/wasm.ts";
import { folderWasmFiles } from "../../../node-apis/wasm/folder-files.ts";

export function cachedWasmFiles(build: WasmBuildOptions = {}): WasmFiles {
  return {
    async files(flavor) {
      // STRATA_WASM_DIR: a module not (yet) in the cache, as the build's smoke check loads it
      const dir = Deno.env.get("STRATA_WASM_DIR") ?? await ensureWasmEngine(flavor, build);
      return await folderWasmFiles(dir).files(flavor);
    },
  };
}
