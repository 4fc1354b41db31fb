// A Deno node's engine: the native library through FFI, or the WASM build in a worker of its
// own (its loader imported only then: a native node holds none of it). Both are refused from
// the model file's header when the range passes the node's memory cap, before a weight is read.
import type { RangeEngine, ShardSpec } from "../../src/engine/range-engine.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { NativeEngine } from "../engine/native/native-engine.ts";
import { checkFileMemory, nodeMemoryCap } from "../engine/memory-cap.ts";

export interface EngineChoice {
  /** native (FFI) or wasm (the WebAssembly build under Deno, in a worker of its own) */
  readonly engine?: "native" | "wasm";
  readonly backend: NativeBackend;
  /** with the wasm engine: WebGPU when the adapter can run it */
  readonly webgpu?: boolean;
  /** with the wasm engine: the wasm64 build */
  readonly memory64?: boolean;
  /** native engines: the core kept from idling this long after each decode (0: never) */
  readonly keepAwakeMs?: number;
}

/** The cap a node runs with: the one asked for, else what its engine defaults to (memory-cap.ts). */
export function engineMemoryCap(c: EngineChoice, asked?: number): number {
  return nodeMemoryCap(c.engine === "wasm" ? (c.memory64 ? "wasm64" : "wasm32") : "native", asked);
}

/** Refuses the spec's range from the file's header alone (the engines check again as they load). */
export async function checkEngineMemory(spec: ShardSpec, c: EngineChoice): Promise<void> {
  await checkFileMemory(spec, {
    capBytes: spec.memoryCapBytes ?? 0,
    flashAttention: c.engine === "wasm" ? !c.webgpu : c.backend === "cpu",
  });
}

export async function loadEngine(spec: ShardSpec, c: EngineChoice): Promise<RangeEngine> {
  if (c.engine === "wasm") {
    const { loadWasmEngine } = await import("../engine/wasm/load.ts");
    return await loadWasmEngine(spec, { webgpu: c.webgpu, memory64: c.memory64 });
  }
  const engine = await NativeEngine.load(spec, c.backend);
  if (c.keepAwakeMs) engine.keepAwake(c.keepAwakeMs);
  return engine;
}
