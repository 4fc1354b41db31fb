// Where a host finds the WASM engine's built files: the one thing the loader asks of a
// runtime. A page fetches them from its origin; Deno reads its build cache
// (server/engine/wasm/cache-files.ts); Node reads a folder.

/** cpu: WASM SIMD + pthreads; webgpu: the same plus ggml's WebGPU backend (ASYNCIFY). */
export type WasmFlavor = "cpu" | "webgpu";

export interface WasmModuleFiles {
  /** strata.mjs, as import() takes it (its pthread workers load strata.worker.js beside it) */
  readonly moduleUrl: string;
  /** strata.wasm */
  readonly wasm: Uint8Array;
}

export interface WasmFiles {
  /** fresh bytes on every call: a worker's loader takes them over */
  files(flavor: WasmFlavor): Promise<WasmModuleFiles>;
}

/** Files served under one absolute base URL: {base}/{flavor}/strata.mjs and strata.wasm. */
export function servedWasmFiles(base: URL): WasmFiles {
  return {
    async files(flavor) {
      const dir = new URL(`${base.href.replace(/\/$/, "")}/${flavor}/`);
      const r = await fetch(new URL("strata.wasm", dir));
      if (!r.ok) throw new Error(`${flavor} engine: HTTP ${r.status} for strata.wasm`);
      return { moduleUrl: new URL("strata.mjs", dir).href, wasm: new Uint8Array(await r.arrayBuffer()) };
    },
  };
}
