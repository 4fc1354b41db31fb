// The WASM engine (CPU, under Deno) on a 2-shard split of SmolLM2 against whole-model
// native llama.cpp: greedy tokens, the hidden state at the seam, and two sessions batched;
// each engine in its worker, as nodes run it.
// Prints one JSON object; wasm.test.ts asserts on it.
import { layerRange } from "../../src/engine/layer-range.ts";
import type { RangeEngine, SeqId } from "../../src/engine/range-engine.ts";
import { maxAbs, maxAbsDiff, top2 } from "../../src/parity/compare.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { loadWasmEngine } from "../../server/engine/wasm/load.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";

const modelPath = defaultModelPath();
const STEPS = 12;
const prompts = [
  Int32Array.from([1, 9690, 28, 2683, 314, 260, 3575, 282, 4649, 47]),
  Int32Array.from([1, 504, 3575, 282, 4649, 314, 4321, 30]),
];
const spec = { modelPath, kvCells: 256, maxSequences: 2, batchTokens: 64, threads: 1 };
const seam = 11; // the residual stream after layer 11 crosses the seam

const t0 = performance.now();
const head = await loadWasmEngine({ ...spec, range: layerRange(0, 12, 30) });
const tail = await loadWasmEngine({ ...spec, range: layerRange(12, 30, 30) });
const loadMs = performance.now() - t0;
const whole = await NativeEngine.load({ ...spec, range: "whole" }, "cpu", { capture: true });
await whole.capture([seam]);
// the same engine kind whole: separates range execution from CPU-kernel numerics
const wasmWhole = await loadWasmEngine({ ...spec, range: "whole" });
// the same with two pthreads: ggml splits rows between threads, never a sum
const wasmWhole2 = await loadWasmEngine({ ...spec, range: "whole", threads: 2 });

const last = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0));
const iota = (from: number, n: number) => Int32Array.from({ length: n }, (_, i) => from + i);

async function step(e: RangeEngine, seq: SeqId, input: Int32Array | Float32Array, pos: Int32Array) {
  const n = pos.length;
  return await e.decode({
    ...(input instanceof Int32Array ? { tokens: input } : { hidden: input }),
    seq: new Int32Array(n).fill(seq),
    pos,
    outputs: last(n),
  });
}

const sessions = [];
let hiddenDiff = 0;
let hiddenScale = 0;
let logitDiff = 0;
let wasmLogitDiff = 0;
let threadsLogitDiff = 0;
for (const prompt of prompts) {
  const [sh, st, sw] = [head.openSequence(), tail.openSequence(), whole.openSequence()];
  const sww = wasmWhole.openSequence();
  const sw2 = wasmWhole2.openSequence();
  const wasmWholeTokens: number[] = [];
  const wasmTokens: number[] = [];
  const nativeTokens: number[] = [];
  let input = prompt;
  let pos = iota(0, prompt.length);
  for (let i = 0; i < STEPS; i++) {
    const h = await step(head, sh, input, pos);
    const l = await step(tail, st, h.data, pos);
    const w = await step(whole, sw, input, pos);
    const ww = await step(wasmWhole, sww, input, pos);
    const w2 = await step(wasmWhole2, sw2, input, pos);
    threadsLogitDiff = Math.max(threadsLogitDiff, maxAbsDiff(ww.data, w2.data));
    wasmLogitDiff = Math.max(wasmLogitDiff, maxAbsDiff(l.data, ww.data));
    wasmWholeTokens.push(top2(ww.data).best);
    const ref = await whole.captured(seam);
    hiddenDiff = Math.max(hiddenDiff, maxAbsDiff(h.data, ref));
    hiddenScale = Math.max(hiddenScale, maxAbs(ref));
    logitDiff = Math.max(logitDiff, maxAbsDiff(l.data, w.data));
    const a = top2(l.data).best;
    const b = top2(w.data).best;
    wasmTokens.push(a);
    nativeTokens.push(b);
    if (a !== b && a !== wasmWholeTokens[i]) break;
    input = Int32Array.of(a);
    pos = iota(pos[pos.length - 1] + 1, 1);
  }
  await head.releaseSequence(sh);
  await tail.releaseSequence(st);
  await whole.releaseSequence(sw);
  await wasmWhole.releaseSequence(sww);
  await wasmWhole2.releaseSequence(sw2);
  sessions.push({ wasmTokens, wasmWholeTokens, nativeTokens });
}

// both sessions in one batch through the WASM shards: each gives its alone tokens
const batched: number[][] = [[], []];
{
  const sh = prompts.map(() => head.openSequence());
  const st = prompts.map(() => tail.openSequence());
  let inputs = prompts.map((p) => Array.from(p));
  let starts = [0, 0];
  for (let i = 0; i < STEPS; i++) {
    const toks: number[] = [], pos: number[] = [], sq: number[] = [], sqt: number[] = [], outs: number[] = [];
    inputs.forEach((inp, s) =>
      inp.forEach((t, k) => {
        toks.push(t);
        pos.push(starts[s] + k);
        sq.push(sh[s]);
        sqt.push(st[s]);
        outs.push(k === inp.length - 1 ? 1 : 0);
      })
    );
    const h = await head.decode({
      tokens: Int32Array.from(toks),
      pos: Int32Array.from(pos),
      seq: Int32Array.from(sq),
    });
    const l = await tail.decode({
      hidden: h.data,
      pos: Int32Array.from(pos),
      seq: Int32Array.from(sqt),
      outputs: Uint8Array.from(outs),
    });
    const next = [0, 1].map((s) => top2(l.data.subarray(s * l.dim, (s + 1) * l.dim)).best);
    next.forEach((t, s) => batched[s].push(t));
    starts = starts.map((x, s) => x + inputs[s].length);
    inputs = next.map((t) => [t]);
  }
}
const memory = [await head.memory(), await tail.memory()];
await Promise.all([head.close(), tail.close(), whole.close(), wasmWhole.close(), wasmWhole2.close()]);

// refusals raised inside an engine's worker reach the caller with their codes
const codeOf = (p: Promise<unknown>) => p.then(() => "loaded", (e) => e.code);
const workerErrors = {
  pastTheModel: await codeOf(loadWasmEngine({ ...spec, range: layerRange(20, 40) })),
  tooManyThreads: await codeOf(loadWasmEngine({ ...spec, range: "whole", threads: 9 })),
};
console.log(JSON.stringify({
  loadMs,
  sessions,
  batched,
  maxAbsDiffHidden: hiddenDiff,
  hiddenScale,
  maxAbsDiffLogits: logitDiff,
  maxAbsDiffLogitsVsWasmWhole: wasmLogitDiff,
  threadsLogitDiff,
  memory,
  workerErrors,
}));
Deno.exit(0); // the engines' pthread workers would keep the process alive
