// One loaded layer range that a parity run or a benchmark drives step by step, wherever
// it runs: its own OS process (native or WASM engine) or a browser tab.
import type { EngineMemory, ModelFacts, SeqId } from "../../src/engine/range-engine.ts";
import type { LayerRange } from "../../src/engine/layer-range.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";

/** Native libraries, the WASM engine on CPU, or the WASM engine on WebGPU (CPU when none). */
export type HostBackend = NativeBackend | "wasm" | "webgpu";

export interface EngineHostLoad {
  modelPath: string;
  range: LayerRange | "whole";
  kvCells: number;
  maxSequences: number;
  batchTokens: number;
  threads: number;
  backend: HostBackend;
  capture?: boolean;
}

export interface EngineHostStep {
  rows: number;
  dim: number;
  data: Float32Array;
  captured: Float32Array[];
}

export interface EngineHost {
  readonly facts: ModelFacts;
  readonly label: string;
  /** the engine's own backend name once loaded, e.g. "wasm-cpu" or "wasm-webgpu" */
  readonly engineBackend: string;
  open(): Promise<SeqId>;
  decode(
    input: Int32Array | Float32Array,
    pos: Int32Array,
    seq: Int32Array,
    outputs: Uint8Array,
    capture?: number[],
  ): Promise<EngineHostStep>;
  release(seq: SeqId): Promise<EngineMemory>;
  memory(): Promise<{ memory: EngineMemory; rss: number }>;
  close(): Promise<void>;
}

export const hostLabel = (range: LayerRange | "whole") =>
  range === "whole" ? "whole model" : `shard ${range.start}:${range.end}`;
