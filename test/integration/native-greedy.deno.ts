// Whole-model native llama.cpp's greedy continuation of one prompt, for checks that run
// the WASM engine outside Deno (wasm-node.test.ts): prints the tokens, the top-2 gap of
// each step, where the model and the WASM build are, and writes each step's logits; then
// the same 2-shard WASM split as the Node run, under Deno, fed those tokens (its logits to
// WASM_LOGITS_FILE).
import { layerRange } from "../../src/engine/layer-range.ts";
import type { RangeEngine } from "../../src/engine/range-engine.ts";
import { top2 } from "../../src/parity/compare.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { ensureWasmEngine } from "../../server/build/wasm.ts";
import { loadWasmEngine } from "../../server/engine/wasm/load.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";

const STEPS = Number(Deno.env.get("STEPS") ?? 16);
const out = Deno.env.get("LOGITS_FILE")!;
const prompt = [1, 9690, 28, 2683, 314, 260, 3575, 282, 4649, 47];
const modelPath = defaultModelPath();
const e = await NativeEngine.load(
  { modelPath, kvCells: 256, maxSequences: 1, batchTokens: 64, threads: 1, range: "whole" },
  "cpu",
);
const seq = e.openSequence();
const tokens: number[] = [];
const gaps: number[] = [];
const file = await Deno.open(out, { write: true, create: true, truncate: true });
let input = Int32Array.from(prompt);
let pos = 0;
for (let i = 0; i < STEPS; i++) {
  const n = input.length;
  const r = await e.decode({
    tokens: input,
    seq: new Int32Array(n).fill(seq),
    pos: Int32Array.from({ length: n }, (_, k) => pos + k),
    outputs: Uint8Array.from({ length: n }, (_, k) => (k === n - 1 ? 1 : 0)),
  });
  await file.write(new Uint8Array(r.data.buffer, r.data.byteOffset, r.data.byteLength));
  const t = top2(r.data);
  tokens.push(t.best);
  gaps.push(t.gap);
  pos += n;
  input = Int32Array.of(t.best);
}
file.close();
await e.close();

// the WASM split under Deno, teacher-forced on the native tokens
const spec = { modelPath, kvCells: 256, maxSequences: 1, batchTokens: 64, threads: 1 };
const head = await loadWasmEngine({ ...spec, range: layerRange(0, 12, 30) });
const tail = await loadWasmEngine({ ...spec, range: layerRange(12, 30, 30) });
const wasmFile = await Deno.open(Deno.env.get("WASM_LOGITS_FILE")!, {
  write: true,
  create: true,
  truncate: true,
});
const [sh, st] = [head.openSequence(), tail.openSequence()];
const run = (e: RangeEngine, seq: number, x: Int32Array | Float32Array, at: number, n: number) =>
  e.decode({
    ...(x instanceof Int32Array ? { tokens: x } : { hidden: x }),
    seq: new Int32Array(n).fill(seq),
    pos: Int32Array.from({ length: n }, (_, k) => at + k),
    outputs: Uint8Array.from({ length: n }, (_, k) => (k === n - 1 ? 1 : 0)),
  });
input = Int32Array.from(prompt);
pos = 0;
for (let i = 0; i < STEPS; i++) {
  const n = input.length;
  const h = await run(head, sh, input, pos, n);
  const t = await run(tail, st, h.data, pos, n);
  await wasmFile.write(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  pos += n;
  input = Int32Array.of(tokens[i]);
}
wasmFile.close();
console.log(JSON.stringify({ modelPath, wasmDir: await ensureWasmEngine("cpu"), prompt, tokens, gaps }));
Deno.exit(0);
