// The WASM engine (CPU) beside the native CPU engine on the same machine: load time, prefill
// rate, decode time per token and per layer, for the whole model in one process each (WASM
// in its worker, as nodes run it).
// Prints figures; asserts nothing.
import { statSync } from "node:fs";
import { join } from "node:path";
import type { RangeEngine } from "../../src/engine/range-engine.ts";
import { top2 } from "../../src/parity/compare.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { ensureWasmEngine } from "../../server/build/wasm.ts";
import { loadWasmEngine } from "../../server/engine/wasm/load.ts";
import { WorkerEngine } from "../../src/engine/wasm/worker-engine.ts";

export interface WasmBenchOptions {
  readonly modelPath: string;
  readonly prompt: number;
  readonly tokens: number;
}

async function measure(load: () => Promise<RangeEngine>, o: WasmBenchOptions) {
  const t0 = performance.now();
  const e = await load();
  const loadMs = performance.now() - t0;
  try {
    const seq = e.openSequence();
    const prompt = Int32Array.from({ length: o.prompt }, (_, i) => 1000 + ((i * 7919) % 20000));
    const last = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0));
    const p0 = performance.now();
    let r = await e.decode({
      tokens: prompt,
      seq: new Int32Array(o.prompt).fill(seq),
      pos: Int32Array.from(prompt.keys()),
      outputs: last(o.prompt),
    });
    const prefillS = (performance.now() - p0) / 1000;
    const gpuWaits = () => (e instanceof WorkerEngine ? e.gpuWaits() : undefined);
    const waits0 = gpuWaits();
    const d0 = performance.now();
    for (let i = 0; i < o.tokens; i++) {
      r = await e.decode({
        tokens: Int32Array.of(top2(r.data).best),
        seq: Int32Array.of(seq),
        pos: Int32Array.of(o.prompt + i),
        outputs: last(1),
      });
    }
    const decodeMs = (performance.now() - d0) / o.tokens;
    const waits1 = gpuWaits();
    return {
      backend: e.backend,
      gpu_readbacks_per_step: waits0 === undefined ? undefined : (waits1! - waits0) / o.tokens,
      load_ms: loadMs,
      prefill_tok_s: o.prompt / prefillS,
      decode_ms_per_token: decodeMs,
      decode_ms_per_layer: decodeMs / e.facts.nLayer,
      decode_tok_s: 1000 / decodeMs,
    };
  } finally {
    await e.close();
  }
}

type Row = Awaited<ReturnType<typeof measure>> & {
  engine: string;
  threads: number;
  prompt_tokens?: number;
  decode_steps?: number;
};

export async function benchWasm(o: WasmBenchOptions) {
  const spec = {
    modelPath: o.modelPath,
    range: "whole" as const,
    kvCells: o.prompt + o.tokens + 8,
    maxSequences: 1,
    batchTokens: Math.max(64, o.prompt),
  };
  const rows: Row[] = [];
  const ratios: Record<string, { decode: number; prefill: number }> = {};
  for (const threads of [1, 2]) {
    const native = await measure(() => NativeEngine.load({ ...spec, threads }, "cpu"), o);
    const wasm = await measure(() => loadWasmEngine({ ...spec, threads }), o);
    rows.push({ engine: "native-cpu", threads, ...native }, { engine: "wasm-cpu", threads, ...wasm });
    ratios[`threads_${threads}`] = {
      decode: wasm.decode_tok_s / native.decode_tok_s,
      prefill: wasm.prefill_tok_s / native.prefill_tok_s,
    };
  }
  // WebGPU (Deno's adapter; WASM CPU with a logged reason where it cannot), one thread
  // (lavapipe runs a token in seconds: a shorter prompt and fewer steps)
  const gpuRun = { ...o, prompt: Math.min(o.prompt, 16), tokens: Math.min(o.tokens, 4) };
  const webgpu = await measure(() => loadWasmEngine({ ...spec, threads: 1 }, { webgpu: true }), gpuRun);
  rows.push({
    engine: webgpu.backend,
    threads: 1,
    ...webgpu,
    prompt_tokens: gpuRun.prompt,
    decode_steps: gpuRun.tokens,
  });
  const cpu1 = rows.find((r) => r.engine === "wasm-cpu" && r.threads === 1)!;
  const dir = await ensureWasmEngine();
  return {
    webgpu_vs_wasm_cpu: {
      decode: webgpu.decode_tok_s / cpu1.decode_tok_s,
      prefill: webgpu.prefill_tok_s / cpu1.prefill_tok_s,
    },
    prompt_tokens: o.prompt,
    decode_tokens: o.tokens,
    rows,
    wasm_vs_native: ratios,
    wasm_file_bytes: statSync(join(dir, "strata.wasm")).size,
    webgpu_file_bytes: statSync(join(await ensureWasmEngine("webgpu"), "strata.wasm")).size,
  };
}

export function printWasmBench(r: Awaited<ReturnType<typeof benchWasm>>): string {
  const row = (x: Row) =>
    `${x.engine.padEnd(11)} ${x.threads} thr  load ${x.load_ms.toFixed(0).padStart(5)} ms, prefill ${
      x.prefill_tok_s.toFixed(0).padStart(4)
    } tok/s, decode ${x.decode_tok_s.toFixed(1).padStart(5)} tok/s (${
      x.decode_ms_per_layer.toFixed(3)
    } ms a layer)`;
  return [
    `whole model, prompt ${r.prompt_tokens} tokens, ${r.decode_tokens} decode steps`,
    ...r.rows.map(row),
    ...Object.entries(r.wasm_vs_native).map(([k, v]) =>
      `wasm / native, ${k.replace("_", " ")}: decode ${v.decode.toFixed(2)}×, prefill ${
        v.prefill.toFixed(2)
      }×`
    ),
    `webgpu / wasm cpu (1 thread): decode ${r.webgpu_vs_wasm_cpu.decode.toFixed(2)}×, prefill ${
      r.webgpu_vs_wasm_cpu.prefill.toFixed(2)
    }×`,
    `strata.wasm ${(r.wasm_file_bytes / 2 ** 20).toFixed(2)} MiB (cpu), ${
      (r.webgpu_file_bytes / 2 ** 20).toFixed(2)
    } MiB (webgpu)`,
  ].join("\n");
}
