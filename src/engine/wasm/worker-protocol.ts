// Messages between a WorkerEngine (on the thread that carries seams) and the worker that
// owns the WASM module and its engine (engine-worker.ts). Requests carry an id and are
// answered in order; errors cross as {code, message}, so EngineError codes survive.
import { EngineError, type EngineErrorCode } from "../errors.ts";
import type { DecodeBatch, GrammarSpec, ModelFacts } from "../range-engine.ts";
import type { WasmEngineRequest } from "./load-engine.ts";
import type { WasmFlavor, WasmModuleFiles } from "./wasm-files.ts";

/** What messages need of a Worker (browsers, Deno) and of a worker's own scope. */
export interface EnginePort {
  postMessage(message: unknown, transfer: Transferable[]): void;
  onmessage: ((e: MessageEvent) => void) | null;
}

/** A Worker as browsers and Deno make it. */
export type EngineWorker = EnginePort & { terminate(): void; onerror: ((e: ErrorEvent) => void) | null };

export type WorkerRequest =
  | { id: number; op: "load"; request: WasmEngineRequest }
  | { id: number; op: "open"; seq: number }
  | { id: number; op: "decode"; batch: DecodeBatch }
  | { id: number; op: "release"; seq: number }
  | { id: number; op: "trim"; seq: number; pos: number }
  | { id: number; op: "copy"; src: number; dst: number; pos: number }
  | { id: number; op: "export"; seq: number }
  | { id: number; op: "import"; seq: number; state: Uint8Array }
  | { id: number; op: "memory" }
  | { id: number; op: "grammar"; spec: GrammarSpec }
  | { id: number; op: "grammar_mask"; grammar: number; logits: Float32Array }
  | { id: number; op: "grammar_accept"; grammar: number; token: number }
  | { id: number; op: "grammar_close"; grammar: number }
  | { id: number; op: "close" };

/** The answer to "load". */
export interface WorkerLoaded {
  readonly facts: ModelFacts;
  readonly backend: string;
  readonly recipe: Uint8Array;
  readonly fallback?: string;
}

export interface WireError {
  readonly code: EngineErrorCode;
  readonly message: string;
}

export type WorkerReply =
  /** gpuWaits: the WebGPU flavor's count so far, with every answer */
  | { id: number; ok: unknown; gpuWaits?: number }
  | { id: number; error: WireError };

/** The worker asks its host for a flavor's files: only the host knows where they are. */
export interface FilesRequest {
  readonly files: number;
  readonly flavor: WasmFlavor;
}
export type FilesReply = { files: number; ok: WasmModuleFiles } | { files: number; error: string };

export function toWire(err: unknown): WireError {
  const code = err instanceof EngineError ? err.code : "engine_failed";
  return { code, message: err instanceof Error ? err.message : String(err) };
}

export const fromWire = (e: WireError): EngineError => new EngineError(e.code, e.message);

/** The distinct ArrayBuffers under some views (shared memory cannot move), for a transfer list. */
export function buffersOf(views: readonly (ArrayBufferView | undefined)[]): ArrayBuffer[] {
  const out = new Set<ArrayBuffer>();
  for (const v of views) if (v && v.buffer instanceof ArrayBuffer) out.add(v.buffer);
  return [...out];
}
