// The WASM engine under Deno: one module instance per engine (each has its own memory),
// the model's bytes read from disk and handed over.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { ShardSpec } from "../../../src/engine/range-engine.ts";
import { type StrataModule, WasmEngine } from "../../../src/engine/wasm/wasm-engine.ts";
import { ensureWasmEngine } from "./build.ts";

export async function instantiateStrata(): Promise<StrataModule> {
  const dir = await ensureWasmEngine();
  const { default: createStrata } = await import(pathToFileURL(join(dir, "strata.mjs")).href);
  return await createStrata({
    wasmBinary: await Deno.readFile(join(dir, "strata.wasm")),
    // llama.cpp's own log goes to stderr; quiet unless asked
    print: () => {},
    printErr: Deno.env.get("STRATA_ENGINE_LOG") ? (s: string) => console.error(s) : () => {},
  }) as StrataModule;
}

export async function loadWasmEngine(spec: ShardSpec): Promise<WasmEngine> {
  const [m, bytes] = await Promise.all([instantiateStrata(), Deno.readFile(spec.modelPath)]);
  return WasmEngine.load(m, bytes, spec);
}
