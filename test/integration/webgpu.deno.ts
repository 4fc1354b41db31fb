// ggml's WebGPU backend inside the WASM engine (webgpu flavor, ASYNCIFY) under Deno, whose
// navigator.gpu is lavapipe here: SmolLM2 0:30 offloaded, a short greedy decode, compared
// with the same module on its CPU path and, when a native library is at hand, with native
// whole-model llama.cpp. Counts GPU readbacks per step. Then an adapter without shader-f16
// must make the load fail with a clear message. Prints one JSON object.
//
// Exports that may suspend (reach a WebGPU wait) are called through ccall({async: true}):
// strata_backends, strata_model_load, strata_ctx_new, strata_decode, strata_outputs (it
// synchronizes the backend), strata_ctx_free, strata_model_free.
import { forcedAgreement, maxAbsDiff, type Step, top2 } from "../../src/parity/compare.ts";
import { CROSS_ENGINE_TOLERANCE } from "../../src/parity/tolerance.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { findNativeLibrary } from "../../server/build/native.ts";
import { instantiateStrata } from "../../server/engine/wasm/load.ts";
import { WasmAbi } from "../../src/engine/wasm/abi.ts";
import { WasmCalls } from "../../src/engine/wasm/wasm-calls.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";

const STEPS = Number(Deno.env.get("STEPS") ?? 16);
const prompt = [1, 9690, 28, 2683, 314, 260, 3575, 282, 4649, 47];
const modelPath = defaultModelPath();
// deno-lint-ignore no-explicit-any -- the raw module, called export by export
type Module = any;

// the engine's own loader: module workers under Deno, llama.cpp's log behind STRATA_ENGINE_LOG
const instantiate = (): Promise<Module> => instantiateStrata("webgpu");

const call = (m: Module, name: string, ret: string | null, types: string[], args: unknown[]) =>
  m.ccall(name, ret, types, args, { async: true });

/** the heap now (shared memory grows without renewing old views) */
const heap = (m: Module): ArrayBuffer | SharedArrayBuffer => m.wasmMemory?.buffer ?? m.HEAPU8.buffer;

function cstr(m: Module, p: number): string {
  return p ? m.UTF8ToString(p) : "";
}

/** A heap buffer for errors: calls without a handle write theirs there. */
function errorBuffer(m: Module): { p: number; cap: number; read(): string; free(): void } {
  const cap = 1024;
  const p = m._malloc(cap);
  new Uint8Array(heap(m))[p] = 0;
  return { p, cap, read: () => cstr(m, p), free: () => m._free(p) };
}

function ctxError(m: Module, ctx: number): string {
  const e = errorBuffer(m);
  m._strata_ctx_error(ctx, e.p, e.cap);
  const s = e.read();
  e.free();
  return s;
}

async function backends(m: Module): Promise<string> {
  const p = m._malloc(256);
  await call(m, "strata_backends", "number", ["number", "number"], [p, 256]);
  const s = cstr(m, p);
  m._free(p);
  return s;
}

async function load(m: Module, bytes: Uint8Array, gpuLayers: number) {
  m.FS.mkdirTree("/models");
  m.FS.writeFile("/models/m.gguf", bytes);
  const t0 = performance.now();
  const err = errorBuffer(m);
  try {
    const model = await call(m, "strata_model_load", "number", [
      "string",
      ...Array(6).fill("number"),
    ], [
      "/models/m.gguf",
      0,
      30,
      gpuLayers,
      0,
      err.p,
      err.cap,
    ]);
    m.FS.unlink("/models/m.gguf");
    if (!model) return { error: err.read() };
    const ctx = await call(m, "strata_ctx_new", "number", Array(8).fill("number"), [
      model,
      256,
      1,
      64,
      1,
      0,
      err.p,
      err.cap,
    ]);
    if (!ctx) return { error: err.read() };
    return { model, ctx, loadMs: performance.now() - t0 };
  } finally {
    err.free();
  }
}

/** Greedy decode (or fed the given tokens); logits of every step, timings, readbacks per step. */
async function run(m: Module, ctx: number, forced?: number[]) {
  const dim = 49152;
  const bufs = [m._malloc(4 * 64), m._malloc(4 * 64), m._malloc(4 * 64), m._malloc(64)];
  const dst = m._malloc(4 * dim);
  const stats = m.webgpuStats;
  const logits: Float32Array[] = [];
  const tokens: number[] = [];
  const stepMs: number[] = [];
  const readbacks: number[] = [];
  let input = prompt;
  let pos = 0;
  for (let i = 0; i < STEPS; i++) {
    const n = input.length;
    const h32 = new Int32Array(heap(m));
    h32.set(input, bufs[0] >> 2);
    h32.set(input.map((_, k) => pos + k), bufs[1] >> 2);
    h32.set(new Array(n).fill(0), bufs[2] >> 2);
    new Uint8Array(heap(m)).set(input.map((_, k) => (k === n - 1 ? 1 : 0)), bufs[3]);
    const before = stats ? stats.mapWaits + stats.workDoneWaits : 0;
    const t = performance.now();
    // each array with its element count
    const count = n;
    const rows = await call(m, "strata_decode", "number", Array(12).fill("number"), [
      ctx,
      n,
      bufs[0],
      count,
      0,
      0,
      bufs[1],
      count,
      bufs[2],
      count,
      bufs[3],
      count,
    ]);
    if (rows !== 1) throw new Error(`decode: ${rows} ${ctxError(m, ctx)}`);
    // strata_outputs reaches llama_synchronize, a WebGPU queue wait: it may suspend too
    await call(m, "strata_outputs", "number", ["number", "number", "number"], [ctx, dst, BigInt(dim)]);
    stepMs.push(performance.now() - t);
    readbacks.push(stats ? stats.mapWaits + stats.workDoneWaits - before : 0);
    const row = new Float32Array(heap(m), dst, dim).slice();
    logits.push(row);
    tokens.push(top2(row).best);
    pos += n;
    input = [forced ? forced[i] : tokens[tokens.length - 1]];
  }
  [...bufs, dst].forEach((p) => m._free(p));
  const decode = stepMs.slice(1);
  return {
    tokens,
    logits,
    prefillMs: stepMs[0],
    decodeTokPerS: 1000 * decode.length / decode.reduce((a, b) => a + b, 0),
    readbacksPerStep: readbacks,
  };
}

const bytes = await Deno.readFile(modelPath);
const m = await instantiate();
const names = await backends(m);
const gpu = await load(m, bytes, 999);
if ("error" in gpu) {
  console.log(JSON.stringify({ backends: names, error: gpu.error }));
  Deno.exit(1);
}
const g = await run(m, gpu.ctx);
const s = m.webgpuStats;
const statsAfter = { ...s };

// grammars in this flavor (ASYNCIFY, and exception catching in the grammar's file alone): a bad
// one is an error, a good one masks, and the module decodes on after both
const calls = new WasmCalls(m, new WasmAbi(m, false, true));
const bad = calls.grammarNew(gpu.model, { gbnf: "root ::= undefined-rule" });
const good = calls.grammarNew(gpu.model, { gbnf: 'root ::= "yes" | "no"' });
const mask = new Float32Array(49152);
const allowed = good.handle ? calls.grammarApply(good.handle, mask) : -1;
if (good.handle) calls.grammarFree(good.handle);
const grammar = { bad: bad.handle ? "accepted" : bad.error, allowed };

// the same module on its CPU path (ASYNCIFY build, 1 thread), fed the WebGPU tokens
const cpu = await load(m, bytes, 0);
if ("error" in cpu) throw new Error(cpu.error);
const c = await run(m, cpu.ctx, g.tokens);

// native whole model, when its library is built (STRATA_NATIVE_LIB may point at one)
let native: { tokens: number[]; logits: Float32Array[]; maxAbsDiffLogits: number } | undefined;
if (await findNativeLibrary("cpu")) {
  const e = await NativeEngine.load(
    { modelPath, kvCells: 256, maxSequences: 1, batchTokens: 64, threads: 1, range: "whole" },
    "cpu",
  );
  const seq = e.openSequence();
  const tokens: number[] = [];
  const logits: Float32Array[] = [];
  let diff = 0;
  let input = Int32Array.from(prompt);
  let pos = 0;
  for (let i = 0; i < STEPS; i++) {
    const n = input.length;
    const out = await e.decode({
      tokens: input,
      seq: new Int32Array(n).fill(seq),
      pos: Int32Array.from({ length: n }, (_, k) => pos + k),
      outputs: Uint8Array.from({ length: n }, (_, k) => (k === n - 1 ? 1 : 0)),
    });
    diff = Math.max(diff, maxAbsDiff(out.data, g.logits[i]));
    tokens.push(top2(out.data).best);
    logits.push(out.data);
    pos += n;
    input = Int32Array.of(g.tokens[i]); // teacher-forced on the WebGPU tokens
  }
  await e.close();
  native = { tokens, logits, maxAbsDiffLogits: diff };
}

const steps = (tokens: number[], logits: Float32Array[]): Step[] =>
  tokens.map((token, i) => ({ token, logits: logits[i] }));
let cpuDiff = 0;
g.logits.forEach((l, i) => (cpuDiff = Math.max(cpuDiff, maxAbsDiff(l, c.logits[i]))));

// an adapter without shader-f16: the load must fail with the reason, in a fresh module
const request = navigator.gpu.requestAdapter.bind(navigator.gpu);
navigator.gpu.requestAdapter = async (o?: GPURequestAdapterOptions) => {
  const a = await request(o);
  if (!a) return a;
  const features = new Set([...a.features].filter((f) => f !== "shader-f16"));
  return new Proxy(a, {
    get: (t, p) => {
      if (p === "features") return features;
      const v = Reflect.get(t, p);
      return typeof v === "function" ? v.bind(t) : v;
    },
  });
};
const m2 = await instantiate();
const noF16 = await load(m2, bytes, 999);

console.log(JSON.stringify({
  backends: names,
  grammar,
  loadMs: gpu.loadMs,
  webgpu: {
    tokens: g.tokens,
    prefillMs: g.prefillMs,
    decodeTokPerS: g.decodeTokPerS,
    readbacks: g.readbacksPerStep,
  },
  cpuSameModule: { tokens: c.tokens, prefillMs: c.prefillMs, decodeTokPerS: c.decodeTokPerS },
  // another backend than the reference: the near-tie rule, every step judged on its own (all
  // three runs were fed the WebGPU tokens)
  vsCpu: forcedAgreement(steps(c.tokens, c.logits), steps(g.tokens, g.logits), CROSS_ENGINE_TOLERANCE),
  vsNative: native
    ? forcedAgreement(steps(native.tokens, native.logits), steps(g.tokens, g.logits), CROSS_ENGINE_TOLERANCE)
    : undefined,
  maxAbsDiffLogitsVsCpu: cpuDiff,
  native: native ? { tokens: native.tokens, maxAbsDiffLogits: native.maxAbsDiffLogits } : undefined,
  stats: statsAfter,
  noF16: "error" in noF16 ? noF16.error : "loaded (unexpected)",
}));
Deno.exit(0); // pthread workers keep the process alive
