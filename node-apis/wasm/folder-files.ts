// The WASM engine's files in a build folder (strata.mjs, strata.wasm, and the pthread worker
// beside them), as `strata build --wasm` leaves it; node: APIs only, so Deno and Node share it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { WasmFiles } from "../../src/engine/wasm/wasm-files.ts";

export const folderWasmFiles = (dir: string): WasmFiles => ({
  files: () =>
    Promise.resolve({
      moduleUrl: pathToFileURL(join(dir, "strata.mjs")).href,
      wasm: new Uint8Array(readFileSync(join(dir, "strata.wasm"))),
    }),
});
