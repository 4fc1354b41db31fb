// Run by invariance.test.ts under Deno: one session's logits alone, then the same session
// batched with 1 to 15 batch-mates that join over time (their prefill chunks beside its
// decode steps), one of them released halfway, in a KV pool a released sequence left holes
// in, while its own context crosses 512 cells. Batch-invariant engines must give the same
// logits bit for bit. ENGINE=native|wasm. Prints one JSON object.
import type { RangeEngine, SeqId, ShardSpec } from "../../src/engine/range-engine.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { loadWasmEngine } from "../../server/engine/wasm/load.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";

const wasm = Deno.env.get("ENGINE") === "wasm";
const invariant = Deno.env.get("INVARIANT") !== "0";
const PROMPT = 490; // + STEPS crosses 512 cells
const STEPS = 40;
const spec: ShardSpec = {
  modelPath: defaultModelPath(),
  range: "whole",
  kvCells: 16 * 1024,
  maxSequences: 16,
  batchTokens: 1024,
  threads: 1,
  batchInvariant: invariant,
};
const engine: RangeEngine = wasm ? await loadWasmEngine(spec) : await NativeEngine.load(spec, "cpu");
const argmax = (r: Float32Array) => r.reduce((b, v, i) => (v > r[b] ? i : b), 0);
const prompt = (n: number, salt: number) =>
  Int32Array.from({ length: n }, (_, i) => 100 + ((i * 7919 + salt * 104729) % 40000));
const lastOnly = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0));

interface Row {
  tokens: number[];
  seq: number[];
  pos: number[];
  out: number[];
}
const push = (b: Row, t: ArrayLike<number>, seq: number, from: number, lastOut = true) => {
  for (let i = 0; i < t.length; i++) {
    b.tokens.push(t[i]);
    b.seq.push(seq);
    b.pos.push(from + i);
    b.out.push(lastOut && i === t.length - 1 ? 1 : 0);
  }
};
const run = (b: Row) =>
  engine.decode({
    tokens: Int32Array.from(b.tokens),
    seq: Int32Array.from(b.seq),
    pos: Int32Array.from(b.pos),
    outputs: Uint8Array.from(b.out),
  });

/** The target's logits per step; with mates > 0, batched as described above. */
async function target(mates: number): Promise<Float32Array[]> {
  const held: SeqId[] = [];
  if (mates > 0) {
    // a sequence that comes and goes first, so the pool has a hole
    const junk = engine.openSequence();
    const jp = prompt(37, 99);
    await engine.decode({
      tokens: jp,
      seq: new Int32Array(37).fill(junk),
      pos: Int32Array.from(jp.keys()),
      outputs: lastOnly(37),
    });
    held.push(junk);
  }
  const s = engine.openSequence();
  if (held.length) await engine.releaseSequence(held.pop()!);
  const p = prompt(PROMPT, 0);
  const first: Row = { tokens: [], seq: [], pos: [], out: [] };
  push(first, p, s, 0);
  const mateState: { seq: SeqId; next: number; tok: number }[] = [];
  const joinMate = (b: Row, k: number) => {
    const m = engine.openSequence();
    const q = prompt(5 + (k * 3) % 17, k + 2);
    push(b, q, m, 0);
    mateState.push({ seq: m, next: q.length, tok: -1 });
  };
  if (mates > 0) joinMate(first, 0);
  let r = await run(first);
  const logits = [r.data.slice(0, r.dim)];
  let order = mateState.slice();
  order.forEach((m, k) => (m.tok = argmax(r.data.subarray((k + 1) * r.dim, (k + 2) * r.dim))));
  for (let i = 0; i < STEPS; i++) {
    const b: Row = { tokens: [], seq: [], pos: [], out: [] };
    push(b, [argmax(logits[logits.length - 1])], s, PROMPT + i);
    order = [];
    for (const m of mateState) {
      push(b, [m.tok], m.seq, m.next++);
      order.push(m);
    }
    if (mateState.length < mates && i % 2 === 0) {
      joinMate(b, i + 1);
      order.push(mateState[mateState.length - 1]);
    }
    r = await run(b);
    logits.push(r.data.slice(0, r.dim));
    order.forEach((m, k) => (m.tok = argmax(r.data.subarray((k + 1) * r.dim, (k + 2) * r.dim))));
    if (i === STEPS / 2 && mateState.length > 1) await engine.releaseSequence(mateState.splice(0, 1)[0].seq);
  }
  for (const m of mateState) await engine.releaseSequence(m.seq);
  await engine.releaseSequence(s);
  return logits;
}

const bitEqual = (a: Float32Array, b: Float32Array) => a.every((v, i) => Object.is(v, b[i]));
const alone = await target(0);
const results = [];
// mates join one every second step: the 15-mate run passes through every batch size from 2 to 16
for (const mates of [1, 3, 15]) {
  const batched = await target(mates);
  const firstDiff = batched.findIndex((l, i) => !bitEqual(l, alone[i]));
  let maxDiff = 0;
  batched.forEach((l, i) => l.forEach((v, k) => (maxDiff = Math.max(maxDiff, Math.abs(v - alone[i][k])))));
  results.push({ mates, steps: batched.length, first_diff_step: firstDiff, max_abs_diff: maxDiff });
}
const memory = await engine.memory();
await engine.close();
console.log(JSON.stringify({
  engine: engine.backend,
  invariant,
  cells_crossed: PROMPT + STEPS,
  results,
  kv_cells_used_at_end: memory.kvCellsUsed,
}));
Deno.exit(0);
