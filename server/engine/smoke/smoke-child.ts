// The smoke check's child (see smoke-check.ts): one engine, a tiny synthetic model with
// quantized weights (the shapes CPU matmul fast paths take), a mixed batch of three
// sequences' prompts, then two decode steps of all three at once. Prints one JSON line.
import { synthModel } from "../../../src/model/synth.ts";
import type { RangeEngine, ShardSpec } from "../../../src/engine/range-engine.ts";
import { WasmEngine } from "../../../src/engine/wasm/wasm-engine.ts";
import { NativeEngine } from "../native/native-engine.ts";
import { instantiateStrata } from "../wasm/load.ts";
import type { WasmFlavor } from "../../../src/engine/wasm/wasm-files.ts";

const dir = Deno.makeTempDirSync({ prefix: "strata-smoke-" });
const modelPath = `${dir}/smoke.gguf`;
Deno.writeFileSync(
  modelPath,
  synthModel({
    arch: "llama",
    seed: 7,
    nLayer: 2,
    nEmbd: 128,
    nHead: 4,
    nHeadKv: 2,
    nFf: 256,
    weightType: "q8_0",
  }),
);
const threads = 2;
const spec: ShardSpec = {
  modelPath,
  range: "whole",
  kvCells: 256,
  maxSequences: 4,
  batchTokens: 64,
  threads,
};
const started = performance.now();
let engine: RangeEngine | undefined;
try {
  const flavor = (Deno.env.get("SMOKE_FLAVOR") ?? "cpu") as WasmFlavor;
  // the WebGPU flavor's CPU path: its exports may suspend (ASYNCIFY) even without a GPU
  engine = Deno.env.get("SMOKE_ENGINE") === "wasm"
    ? await WasmEngine.load(await instantiateStrata(flavor), Deno.readFileSync(modelPath), spec, {
      suspends: flavor === "webgpu",
    })
    : await NativeEngine.load(spec, "cpu");
  const seqs = [engine.openSequence(), engine.openSequence(), engine.openSequence()];
  const prompts = [[1, 5, 9, 12, 40], [1, 7], [1, 100, 3]];
  const tokens: number[] = [];
  const pos: number[] = [];
  const seq: number[] = [];
  const outputs: number[] = [];
  prompts.forEach((p, s) =>
    p.forEach((t, i) => {
      tokens.push(t);
      pos.push(i);
      seq.push(seqs[s]);
      outputs.push(i === p.length - 1 ? 1 : 0);
    })
  );
  let out = await engine.decode({
    tokens: Int32Array.from(tokens),
    pos: Int32Array.from(pos),
    seq: Int32Array.from(seq),
    outputs: Uint8Array.from(outputs),
  });
  let rows = out.rows;
  const next = prompts.map((p) => p.length);
  for (let step = 0; step < 2; step++) {
    const picks = seqs.map((_, s) => argmax(out.data.subarray(s * out.dim, (s + 1) * out.dim)));
    out = await engine.decode({
      tokens: Int32Array.from(picks),
      pos: Int32Array.from(next.map((n) => n + step)),
      seq: Int32Array.from(seqs),
      outputs: new Uint8Array(seqs.length).fill(1),
    });
    rows += out.rows;
  }
  if (!out.data.every(Number.isFinite)) throw new Error("the engine produced non-finite logits");
  console.log(JSON.stringify({ rows, sequences: seqs.length, threads, ms: performance.now() - started }));
} finally {
  await engine?.close();
  Deno.removeSync(dir, { recursive: true });
}
Deno.exit(0); // WASM pthread workers would keep the process alive

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}
