// Run by whole-baseline.test.ts under Deno: the benchmarks' whole-model baseline takes its greedy
// steps in the shard process (decodeGreedy); they must pick what the step's logits say, for
// one session and for several in one batch, and time no more than the parent waited.
import { EngineProcess } from "../../checks/engine-host/engine-process.ts";
import { synthModel } from "../../src/model/synth.ts";
import { top2 } from "../../src/parity/compare.ts";

const file = `${Deno.makeTempDirSync()}/llama.gguf`;
Deno.writeFileSync(file, synthModel({ arch: "llama", seed: 5 }));
const p = await EngineProcess.spawn({
  modelPath: file,
  range: "whole",
  kvCells: 512,
  maxSequences: 4,
  batchTokens: 256,
  threads: 1,
  backend: "cpu",
});
const prompt = Int32Array.from({ length: 9 }, (_, i) => (i * 37) % 300 + 1);
const lastOnly = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0));
// sequences 0 and 1 by logits (picked here), 2 and 3 by the shard's greedy picks: batch-invariant
// engines give each pair the same tokens
const seqs = [await p.open(), await p.open(), await p.open(), await p.open()];
const byLogits: number[][] = [[], []];
const byGreedy: number[][] = [[], []];
let timesWithinWall = true;
let next: number[] = [];
for (const [i, s] of seqs.entries()) {
  const pos = Int32Array.from(prompt.keys());
  const seq = new Int32Array(prompt.length).fill(s);
  if (i < 2) next.push(top2((await p.decode(prompt, pos, seq, lastOnly(prompt.length))).data).best);
  else next.push((await p.decodeGreedy(prompt, pos, seq, lastOnly(prompt.length))).tokens[0]);
}
for (let step = 0; step < 8; step++) {
  const pos = new Int32Array(2).fill(prompt.length + step);
  const a = await p.decode(
    Int32Array.from(next.slice(0, 2)),
    pos,
    Int32Array.from(seqs.slice(0, 2)),
    new Uint8Array(2).fill(1),
  );
  const t0 = performance.now();
  const b = await p.decodeGreedy(
    Int32Array.from(next.slice(2)),
    pos,
    Int32Array.from(seqs.slice(2)),
    new Uint8Array(2).fill(1),
  );
  const wall = performance.now() - t0;
  if (!(b.ms > 0 && b.ms <= wall)) timesWithinWall = false;
  const picked = [0, 1].map((k) => top2(a.data.subarray(k * a.dim, (k + 1) * a.dim)).best);
  for (const k of [0, 1]) {
    byLogits[k].push(picked[k]);
    byGreedy[k].push(b.tokens[k]);
  }
  next = [...picked, ...b.tokens];
}
await p.close();
console.log(JSON.stringify({ byLogits, byGreedy, timesWithinWall }));
