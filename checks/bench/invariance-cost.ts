// What batch-invariant decoding costs the engine: the whole model in one process, with it on
// (the ordered KV pool, the CPU's reference kernels) and off (the pool in any order, the fastest
// kernels), back to back: prefill rate, one session's decode, 8 sessions decoding in one batch.
// Prints figures; asserts nothing.
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import type { RangeEngine } from "../../src/engine/range-engine.ts";
import { top2 } from "../../src/parity/compare.ts";

export interface EngineCost {
  readonly invariant: boolean;
  readonly prefill_tok_s: number;
  readonly decode_tok_s_1: number;
  readonly decode_tok_s_8: number;
}

const PROMPT = 256;
const STEPS = 48;
const prompt = (n: number, salt: number) =>
  Int32Array.from({ length: n }, (_, i) => 100 + ((i * 7919 + salt * 104729) % 40000));
const lastOnly = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0));

async function measure(e: RangeEngine, invariant: boolean): Promise<EngineCost> {
  const seqs = Array.from({ length: 8 }, () => e.openSequence());
  const p = prompt(PROMPT, 0);
  const fill = (s: number, t: Int32Array) =>
    e.decode({
      tokens: t,
      seq: new Int32Array(t.length).fill(s),
      pos: Int32Array.from(t.keys()),
      outputs: lastOnly(t.length),
    });
  await fill(seqs[7], p); // warm-up
  await e.releaseSequence(seqs[7]);
  seqs[7] = e.openSequence();
  const p0 = performance.now();
  let r = await fill(seqs[0], p);
  const prefill = PROMPT / ((performance.now() - p0) / 1000);
  const d0 = performance.now();
  for (let i = 0; i < STEPS; i++) {
    r = await e.decode({
      tokens: Int32Array.of(top2(r.data).best),
      seq: Int32Array.of(seqs[0]),
      pos: Int32Array.of(PROMPT + i),
      outputs: lastOnly(1),
    });
  }
  const decode1 = STEPS / ((performance.now() - d0) / 1000);
  for (let s = 1; s < 8; s++) await fill(seqs[s], prompt(32, s));
  await e.releaseSequence(seqs[0]);
  seqs[0] = e.openSequence();
  await fill(seqs[0], prompt(32, 9));
  const b0 = performance.now();
  for (let i = 0; i < STEPS; i++) {
    await e.decode({
      tokens: Int32Array.from(seqs, (_, k) => 200 + k + i),
      seq: Int32Array.from(seqs),
      pos: new Int32Array(8).fill(32 + i),
      outputs: new Uint8Array(8).fill(1),
    });
  }
  const decode8 = 8 * STEPS / ((performance.now() - b0) / 1000);
  return { invariant, prefill_tok_s: prefill, decode_tok_s_1: decode1, decode_tok_s_8: decode8 };
}

/** Alternating on/off `rounds` times, so that both see the same machine. */
export async function benchInvarianceCost(
  modelPath: string,
  threads: number,
  rounds = 3,
): Promise<EngineCost[]> {
  const out: EngineCost[] = [];
  for (let k = 0; k < rounds; k++) {
    for (const invariant of [true, false]) {
      const e = await NativeEngine.load({
        modelPath,
        range: "whole",
        kvCells: 8 * 1024,
        maxSequences: 8,
        batchTokens: 512,
        threads,
        batchInvariant: invariant,
      }, "cpu");
      try {
        out.push(await measure(e, invariant));
      } finally {
        await e.close();
      }
    }
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export function summarizeCost(runs: EngineCost[]) {
  const pick = (inv: boolean, k: keyof Omit<EngineCost, "invariant">) =>
    median(runs.filter((r) => r.invariant === inv).map((r) => r[k]));
  const keys = ["prefill_tok_s", "decode_tok_s_1", "decode_tok_s_8"] as const;
  return Object.fromEntries(
    keys.map((k) => [k, { on: pick(true, k), off: pick(false, k), ratio: pick(true, k) / pick(false, k) }]),
  );
}
