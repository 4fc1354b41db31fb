// The WASM engine in Node: the very module Deno and the browser load (strata.mjs + .wasm
// + worker, pthreads as worker_threads) through the core's one loader and WasmEngine from
// src/ (directly, on this thread), bundled for Node by the test. A 2-shard split (0:12,
// 12:30) with 2 threads, fed a native greedy run's tokens; writes each step's logits and
// prints one JSON object.
// Arguments: wasm dir, model path, JSON {prompt, tokens}, logits file.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { type LayerRange, layerRange } from "../../src/engine/layer-range.ts";
import type { RangeEngine, SeqId } from "../../src/engine/range-engine.ts";
import { top2 } from "../../src/parity/compare.ts";
import { loadWasmEngineFrom } from "../../src/engine/wasm/load-engine.ts";
import type { WasmFiles } from "../../src/engine/wasm/wasm-files.ts";

const [dir, modelPath, plan, logitsFile] = process.argv.slice(2);
const { prompt, tokens: forced } = JSON.parse(plan) as { prompt: number[]; tokens: number[] };
// Node's host adapter: the build's folder
const files: WasmFiles = {
  files: () =>
    Promise.resolve({
      moduleUrl: pathToFileURL(join(dir, "strata.mjs")).href,
      wasm: new Uint8Array(readFileSync(join(dir, "strata.wasm"))),
    }),
};

const bytes = new Uint8Array(readFileSync(modelPath));
const spec = { modelPath, kvCells: 256, maxSequences: 1, batchTokens: 64, threads: 2 };
const load = async (range: LayerRange) =>
  (await loadWasmEngineFrom(files, { spec: { ...spec, range }, model: bytes })).engine;
const head = await load(layerRange(0, 12, 30));
const tail = await load(layerRange(12, 30, 30));

async function step(e: RangeEngine, seq: SeqId, input: Int32Array | Float32Array, pos: number, n: number) {
  return await e.decode({
    ...(input instanceof Int32Array ? { tokens: input } : { hidden: input }),
    seq: new Int32Array(n).fill(seq),
    pos: Int32Array.from({ length: n }, (_, k) => pos + k),
    outputs: Uint8Array.from({ length: n }, (_, k) => (k === n - 1 ? 1 : 0)),
  });
}

const [sh, st] = [head.openSequence(), tail.openSequence()];
const tokens: number[] = [];
const logits: Float32Array[] = [];
let input = Int32Array.from(prompt);
let pos = 0;
for (let i = 0; i < forced.length; i++) {
  const n = input.length;
  const h = await step(head, sh, input, pos, n); // every row's hidden state
  const t = await step(tail, st, h.data, pos, n);
  logits.push(t.data);
  tokens.push(top2(t.data).best);
  pos += n;
  input = Int32Array.of(forced[i]);
}
const all = new Float32Array(logits.reduce((k, l) => k + l.length, 0));
logits.reduce((o, l) => (all.set(l, o), o + l.length), 0);
writeFileSync(logitsFile, new Uint8Array(all.buffer));
console.log(
  JSON.stringify({
    runtime: `node ${process.versions.node}`,
    backends: [head.backend, tail.backend],
    tokens,
  }),
);
await Promise.all([head.close(), tail.close()]);
process.exit(0);
