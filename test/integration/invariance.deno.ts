// Run by invariance.test.ts under Deno: one session's logits alone, then the same session
// batched with 1 to 15 batch-mates that join over time (their prefill chunks beside its
// decode steps), half of them released out of order halfway and new ones joining into the
// holes, in a KV pool a released sequence left a hole in, while its own context crosses 512
// cells. Then the same session in a pool so small that it must compact under it, and (MODEL=
// synth, a tiny synthetic llama trained for 16K) a session past 8192 positions. Batch-invariant
// engines must give the same logits bit for bit. ENGINE=native|wasm|webgpu (WebGPU on a
// software adapter runs a small synthetic llama, shorter). Prints one JSON object.
import type { RangeEngine, SeqId, ShardSpec } from "../../src/engine/range-engine.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { loadWasmEngine } from "../../server/engine/wasm/load.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { synthModel } from "../../src/model/synth.ts";

const kind = Deno.env.get("ENGINE") ?? "native";
const webgpu = kind === "webgpu";
const wasm = kind === "wasm" || webgpu;
const invariant = Deno.env.get("INVARIANT") !== "0";
const long = Deno.env.get("MODEL") === "synth";
// MODEL=q8_0: a small synthetic llama in Q8_0, whose matmuls take llamafile's sgemm on x86
const q8 = Deno.env.get("MODEL") === "q8_0";
// SmolLM2: + STEPS crosses 512 cells; the synthetic model: crosses 8192 positions; WebGPU on
// lavapipe takes seconds a step of SmolLM2, so a small synthetic llama (still crossing 256 cells)
const PROMPT = long ? 8200 : webgpu ? 240 : 490;
const STEPS = long ? 16 : webgpu ? 24 : 40;
const synthetic = long || q8 || webgpu;
const modelPath = synthetic ? await Deno.makeTempFile({ suffix: ".gguf" }) : defaultModelPath();
// two layers of two heads: its 8200-token prompts take seconds
const synth = long
  ? { arch: "llama", nCtx: 16384, nLayer: 2, nHead: 2, nHeadKv: 1, seed: 5 } as const
  : { arch: "llama", nCtx: 4096, nLayer: 2, weightType: "q8_0", seed: 5 } as const;
if (synthetic) await Deno.writeFile(modelPath, synthModel(synth));
const vocab = synthetic ? 384 : 49152;
const spec = (kvCells: number, maxSequences: number): ShardSpec => ({
  modelPath,
  range: "whole",
  kvCells,
  maxSequences,
  batchTokens: 1024,
  // THREADS=2: the pool a node runs by default; results must not depend on it either
  threads: Number(Deno.env.get("THREADS") ?? 1),
  batchInvariant: invariant,
});
const load = (s: ShardSpec): Promise<RangeEngine> =>
  wasm ? loadWasmEngine(s, { webgpu }) : NativeEngine.load(s, "cpu");
const engine = await load(spec(long ? 32 * 1024 : 16 * 1024, 16));
const argmax = (r: Float32Array) => r.reduce((b, v, i) => (v > r[b] ? i : b), 0);
const prompt = (n: number, salt: number) =>
  Int32Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + salt * 104729) % (vocab - 1)));

interface Row {
  tokens: number[];
  seq: number[];
  pos: number[];
  out: number[];
}
const newRow = (): Row => ({ tokens: [], seq: [], pos: [], out: [] });
const push = (b: Row, t: ArrayLike<number>, seq: number, from: number, lastOut = true) => {
  for (let i = 0; i < t.length; i++) {
    b.tokens.push(t[i]);
    b.seq.push(seq);
    b.pos.push(from + i);
    b.out.push(lastOut && i === t.length - 1 ? 1 : 0);
  }
};
let passes: number[] = [];
const run = async (e: RangeEngine, b: Row) => {
  const r = await e.decode({
    tokens: Int32Array.from(b.tokens),
    seq: Int32Array.from(b.seq),
    pos: Int32Array.from(b.pos),
    outputs: Uint8Array.from(b.out),
  });
  if (new Set(b.seq).size > 1) passes.push(r.passes ?? -1);
  return r;
};
/** A prompt in engine calls of at most 1024 tokens; the last call's output row. */
async function prefill(e: RangeEngine, seq: SeqId, p: Int32Array, first?: Row) {
  let r;
  for (let at = 0; at < p.length; at += 1024) {
    const b = at === 0 && first ? first : newRow();
    push(b, p.subarray(at, Math.min(at + 1024, p.length)), seq, at);
    r = await run(e, b);
  }
  return r!;
}

interface Mate {
  seq: SeqId;
  next: number;
  tok: number;
}

/** The target's logits per step; with mates > 0, batched as described above. */
async function target(e: RangeEngine, mates: number): Promise<Float32Array[]> {
  const held: SeqId[] = [];
  if (mates > 0) {
    // a sequence that comes and goes first, so the pool has a hole
    const junk = e.openSequence();
    await prefill(e, junk, prompt(37, 99));
    held.push(junk);
  }
  const s = e.openSequence();
  if (held.length) await e.releaseSequence(held.pop()!);
  const mateState: Mate[] = [];
  let joined = 0;
  const joinMate = (b: Row) => {
    const m = e.openSequence();
    const q = prompt(5 + (joined * 3) % 17, joined + 2);
    joined++;
    push(b, q, m, 0);
    mateState.push({ seq: m, next: q.length, tok: -1 });
  };
  // the first mate's prompt rides in the target's last prefill call
  const p = prompt(PROMPT, 0);
  const tail = newRow();
  if (p.length > 1024) await prefill(e, s, p.subarray(0, p.length - (p.length % 1024 || 1024)));
  const from = p.length - (p.length % 1024 || 1024);
  push(tail, p.subarray(from), s, from);
  if (mates > 0) joinMate(tail);
  let r = await run(e, tail);
  const logits = [r.data.slice(0, r.dim)];
  let order = mateState.slice();
  order.forEach((m, k) => (m.tok = argmax(r.data.subarray((k + 1) * r.dim, (k + 2) * r.dim))));
  for (let i = 0; i < STEPS; i++) {
    const b = newRow();
    push(b, [argmax(logits[logits.length - 1])], s, PROMPT + i);
    order = [];
    for (const m of mateState) {
      push(b, [m.tok], m.seq, m.next++);
      order.push(m);
    }
    if (mateState.length < mates && i % 2 === 0) {
      joinMate(b);
      order.push(mateState[mateState.length - 1]);
    }
    r = await run(e, b);
    logits.push(r.data.slice(0, r.dim));
    order.forEach((m, k) => (m.tok = argmax(r.data.subarray((k + 1) * r.dim, (k + 2) * r.dim))));
    if (i === STEPS / 2 && mateState.length > 1) {
      // every second mate leaves, the later ones first: holes all over the pool, which the
      // mates that join from now on fill
      for (let k = mateState.length - 1 - ((mateState.length - 1) % 2); k >= 0; k -= 2) {
        await e.releaseSequence(mateState.splice(k, 1)[0].seq);
      }
    }
  }
  for (const m of mateState) await e.releaseSequence(m.seq);
  await e.releaseSequence(s);
  return logits;
}

/**
 * The target in a small pool (llama.cpp rounds pools up to 256 cells), behind a sequence that
 * held the pool's first cells and left: the target's cells end 10 short of the pool's end, so
 * its decode runs out of cells above its own after 10 steps, and the pool compacts (moving
 * every used cell down, in order) to go on. A mate that joined into the hole decodes beside it
 * throughout.
 */
async function compacting(): Promise<Float32Array[]> {
  const cells = Math.ceil((PROMPT + 2 * STEPS + 16) / 256) * 256;
  const e = await load(spec(cells, 4));
  try {
    const junk = e.openSequence();
    await prefill(e, junk, prompt(cells - 10 - PROMPT, 98));
    const s = e.openSequence();
    let r = await prefill(e, s, prompt(PROMPT, 0));
    await e.releaseSequence(junk);
    const logits = [r.data.slice(0, r.dim)];
    const mate = e.openSequence();
    const q = prompt(6, 3);
    const b0 = newRow();
    push(b0, q, mate, 0);
    r = await run(e, b0);
    let mateTok = argmax(r.data.subarray(0, r.dim));
    for (let i = 0; i < STEPS; i++) {
      const b = newRow();
      push(b, [argmax(logits[logits.length - 1])], s, PROMPT + i);
      push(b, [mateTok], mate, q.length + i);
      r = await run(e, b);
      logits.push(r.data.slice(0, r.dim));
      mateTok = argmax(r.data.subarray(r.dim, 2 * r.dim));
    }
    return logits;
  } finally {
    await e.close();
  }
}

const bitEqual = (a: Float32Array, b: Float32Array) => a.every((v, i) => Object.is(v, b[i]));
const compare = (label: Record<string, unknown>, batched: Float32Array[], alone: Float32Array[]) => {
  const firstDiff = batched.findIndex((l, i) => !bitEqual(l, alone[i]));
  let maxDiff = 0;
  batched.forEach((l, i) => l.forEach((v, k) => (maxDiff = Math.max(maxDiff, Math.abs(v - alone[i][k])))));
  return { ...label, steps: batched.length, first_diff_step: firstDiff, max_abs_diff: maxDiff };
};
const alone = await target(engine, 0);
const results = [];
// mates join one every second step: the 15-mate run passes through every batch size from 2 to 16
for (const mates of long ? [3] : [1, 3, 15]) {
  passes = [];
  const batched = await target(engine, mates);
  results.push({ ...compare({ mates }, batched, alone), passes_per_call: Math.max(...passes) });
}
if (!long) results.push(compare({ mates: 1, pool: "compacted" }, await compacting(), alone));

/** Graph passes of one decode step of each slot in `slots` (all 16 open, each 4 tokens in). */
async function slotPasses(slots: number[][]): Promise<number[]> {
  const seqs = Array.from({ length: 16 }, () => engine.openSequence());
  for (const s of seqs) await prefill(engine, s, prompt(4, s));
  const out = [];
  for (const [k, order] of slots.entries()) {
    const b = newRow();
    for (const s of order) push(b, [7], seqs[s], 4 + k);
    out.push((await run(engine, b)).passes ?? -1);
    // the slots left out of this step take theirs alone, so every position stays next in line
    for (const s of seqs.filter((_, i) => !order.includes(i))) {
      const one = newRow();
      push(one, [7], s, 4 + k);
      await run(engine, one);
    }
  }
  for (const s of seqs) await engine.releaseSequence(s);
  return out;
}
const slots = {
  in_order: [0, 1, 2, 3, 4, 5, 6, 7],
  scattered: [0, 2, 4, 6, 8, 10, 12, 14],
  reversed: [15, 14, 13, 12, 11, 10, 9, 8],
};
const slotRuns = await slotPasses(Object.values(slots));
const passesBySlots = Object.fromEntries(Object.keys(slots).map((k, i) => [k, slotRuns[i]]));
const memory = await engine.memory();
await engine.close();
if (synthetic) await Deno.remove(modelPath);
console.log(JSON.stringify({
  engine: engine.backend,
  invariant,
  kv_layout: memory.kvLayout,
  cells_crossed: PROMPT + STEPS,
  results,
  passes_by_slots: passesBySlots,
  kv_cells_used_at_end: memory.kvCellsUsed,
}));
Deno.exit(0);
