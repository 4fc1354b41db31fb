// A browser tab holding one WASM engine, driven from outside (headless Chromium in parity
// runs and benchmarks): `globalThis.strataEngineTab` loads a layer range and decodes batches,
// tensors crossing as base64. The engine (in its worker, as a volunteer tab runs it) and its
// fallback choice are the shared core's.
import { EngineError } from "../../../src/engine/errors.ts";
import { layerRange } from "../../../src/engine/layer-range.ts";
import type { RangeEngine, SeqId } from "../../../src/engine/range-engine.ts";
import { loadEngine } from "../../../web/host/engine.ts";
import { f32FromBase64, fromBase64, i32FromBase64, toBase64 } from "../../../src/bytes/base64.ts";

export interface HostLoad {
  start?: number;
  end?: number;
  kvCells: number;
  maxSequences: number;
  batchTokens: number;
  threads: number;
  /** "webgpu" asks for the GPU and falls back to CPU with a reason when the adapter cannot */
  backend: "wasm" | "webgpu";
}

let engine: RangeEngine | undefined;
const logs: string[] = [];

function need(): RangeEngine {
  if (!engine) throw new EngineError("engine_failed", "no shard loaded in this tab");
  return engine;
}

/** Errors cross page.evaluate as values: a thrown error would lose its code. */
async function guard<T>(
  fn: () => Promise<T> | T,
): Promise<{ ok: T } | { error: { code: string; message: string } }> {
  try {
    return { ok: await fn() };
  } catch (err) {
    const code = err instanceof EngineError ? err.code : "engine_failed";
    return { error: { code, message: err instanceof Error ? err.message : String(err) } };
  }
}

const api = {
  logs: () => guard(() => logs),
  load: (o: HostLoad) =>
    guard(async () => {
      const r = await fetch("/model");
      if (!r.ok) throw new EngineError("load_failed", `model download: HTTP ${r.status}`);
      const range = o.start === undefined ? "whole" as const : layerRange(o.start, o.end!);
      const loaded = await loadEngine(new URL("/engine", location.href), {
        spec: {
          modelPath: "model.gguf",
          range,
          kvCells: o.kvCells,
          maxSequences: o.maxSequences,
          batchTokens: o.batchTokens,
          threads: o.threads,
        },
        model: new Uint8Array(await r.arrayBuffer()),
        webgpu: o.backend === "webgpu",
      });
      engine = loaded.engine;
      if (loaded.fallback) {
        logs.push(loaded.fallback);
        console.warn(loaded.fallback);
      }
      return {
        facts: engine.facts,
        engineBackend: engine.backend,
        memory: await engine.memory(),
        crossOriginIsolated: globalThis.crossOriginIsolated,
      };
    }),
  open: () => guard(() => need().openSequence()),
  decode: (b: { input: string; pos: string; seq: string; outputs: string }) =>
    guard(async () => {
      const e = need();
      const r = await e.decode({
        ...(e.input === "tokens" ? { tokens: i32FromBase64(b.input) } : { hidden: f32FromBase64(b.input) }),
        pos: i32FromBase64(b.pos),
        seq: i32FromBase64(b.seq),
        outputs: fromBase64(b.outputs),
      });
      return { rows: r.rows, dim: r.dim, data: toBase64(r.data) };
    }),
  release: (seq: number) =>
    guard(async () => {
      await need().releaseSequence(seq as SeqId);
      return need().memory();
    }),
  memory: () => guard(() => need().memory()),
  close: () => guard(async () => await engine?.close()),
};

(globalThis as unknown as { strataEngineTab: typeof api }).strataEngineTab = api;
export type EngineTabApi = typeof api;
