// What the one KV pool per node does for a batch: the engine in this process, batch invariance
// on (the ordered pool, reference kernels) and off (a shared pool, the fastest kernels), in
// turns. The slot table: one decode step of 8 sessions whose slots lie in order, scattered or
// reversed, against one session alone. Graph passes per engine call under churn. Prefill rate
// and the time to a long prompt's first token. Prints figures; asserts nothing.
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import type { RangeEngine, SeqId } from "../../src/engine/range-engine.ts";
import { quantile } from "./route-throughput.ts";

export interface KvPoolOptions {
  readonly modelPath: string;
  readonly threads: number;
  readonly rounds: number;
  /** decode steps timed per slot pattern */
  readonly steps: number;
  /** prompt lengths for the prefill rate */
  readonly prompts: readonly number[];
  /** tokens one engine call takes (a longer prompt is prefilled in calls of this many) */
  readonly batchTokens: number;
}

/** The batches of the slot table: which of 16 open sequences decode together. */
export const SLOT_PATTERNS: Readonly<Record<string, readonly number[]>> = {
  one_session: [0],
  in_order_0_7: [0, 1, 2, 3, 4, 5, 6, 7],
  scattered_0_2_14: [0, 2, 4, 6, 8, 10, 12, 14],
  reversed_15_8: [15, 14, 13, 12, 11, 10, 9, 8],
};

const tokensOf = (n: number, salt: number) =>
  Int32Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + salt * 104729) % 20000));

async function fill(e: RangeEngine, seq: SeqId, p: Int32Array, batchTokens: number) {
  let out;
  for (let at = 0; at < p.length; at += batchTokens) {
    const t = p.subarray(at, Math.min(p.length, at + batchTokens));
    out = await e.decode({
      tokens: t,
      seq: new Int32Array(t.length).fill(seq),
      pos: Int32Array.from(t, (_, i) => at + i),
      outputs: Uint8Array.from(t, (_, i) => (at + i === p.length - 1 ? 1 : 0)),
    });
  }
  return out!;
}

/** ms per decode step of each slot pattern, and the graph passes those steps took. */
async function slotTable(e: RangeEngine, o: KvPoolOptions) {
  const seqs = Array.from({ length: 16 }, () => e.openSequence());
  for (const s of seqs) await fill(e, s, tokensOf(16, s), o.batchTokens);
  const next = new Map(seqs.map((s) => [s, 16]));
  const out: Record<string, { ms: number; passes: number }> = {};
  for (const [name, slots] of Object.entries(SLOT_PATTERNS)) {
    const ms: number[] = [];
    let passes = 0;
    for (let i = 0; i < o.steps; i++) {
      const seq = Int32Array.from(slots, (k) => seqs[k]);
      const t0 = performance.now();
      const r = await e.decode({
        tokens: Int32Array.from(slots, (k) => 100 + k + i),
        seq,
        pos: Int32Array.from(seq, (s) => next.get(s as SeqId)!),
        outputs: new Uint8Array(slots.length).fill(1),
      });
      ms.push(performance.now() - t0);
      passes += r.passes ?? 0;
      for (const s of seq) next.set(s as SeqId, next.get(s as SeqId)! + 1);
    }
    out[name] = { ms: quantile(ms, 0.5), passes: passes / o.steps };
  }
  for (const s of seqs) await e.releaseSequence(s);
  return out;
}

/**
 * Sessions coming and going (joins with a prompt, decode steps, leaves in any order) for
 * `calls` engine calls: the graph passes of each call with 2 to 16 decode steps.
 */
async function churn(e: RangeEngine, calls: number) {
  let rng = 7;
  const rand = (n: number) => (rng = (rng * 1103515245 + 12345) % 2 ** 31) % n;
  const live: { seq: SeqId; next: number }[] = [];
  const passes: number[] = [];
  for (let c = 0; c < calls; c++) {
    while (live.length < 2 || (live.length < 16 && rand(3) === 0)) {
      const seq = e.openSequence();
      const p = tokensOf(8 + rand(40), c);
      await fill(e, seq, p, 512);
      live.push({ seq, next: p.length });
    }
    if (live.length > 2 && rand(5) === 0) await e.releaseSequence(live.splice(rand(live.length), 1)[0].seq);
    // a batch of the live sessions in a shuffled order
    const batch = [...live].sort(() => rand(3) - 1).slice(0, 2 + rand(live.length - 1));
    if (batch.length < 2) continue;
    const r = await e.decode({
      tokens: Int32Array.from(batch, (_, i) => 100 + i),
      seq: Int32Array.from(batch, (s) => s.seq),
      pos: Int32Array.from(batch, (s) => s.next),
      outputs: new Uint8Array(batch.length).fill(1),
    });
    for (const s of batch) s.next++;
    if (batch.length >= 2) passes.push(r.passes ?? 0);
  }
  for (const s of live) await e.releaseSequence(s.seq);
  return {
    calls: passes.length,
    passes_per_call: passes.reduce((a, b) => a + b, 0) / passes.length,
    max: Math.max(...passes),
  };
}

/** Prefill tokens a second of one prompt of n tokens, and the time to its first token. */
async function prefill(e: RangeEngine, n: number, batchTokens: number) {
  const seq = e.openSequence();
  const t0 = performance.now();
  await fill(e, seq, tokensOf(n, 3), batchTokens);
  const ms = performance.now() - t0;
  await e.releaseSequence(seq);
  return { tok_s: n / (ms / 1000), ttft_ms: ms };
}

export async function benchKvPool(o: KvPoolOptions, progress: (s: string) => void = () => {}) {
  const runs: Array<
    {
      invariant: boolean;
      round: number;
      slots: Awaited<ReturnType<typeof slotTable>>;
      prefill: Record<number, { tok_s: number; ttft_ms: number }>;
    }
  > = [];
  let churned: Awaited<ReturnType<typeof churn>> | undefined;
  for (let round = 0; round < o.rounds; round++) {
    // the lane that goes first moves each round
    for (const invariant of round % 2 ? [false, true] : [true, false]) {
      progress(`round ${round + 1}/${o.rounds}, invariance ${invariant ? "on" : "off"}`);
      const e = await NativeEngine.load({
        modelPath: o.modelPath,
        range: "whole",
        kvCells: Math.max(8192, 2 * Math.max(...o.prompts)),
        maxSequences: 16,
        batchTokens: o.batchTokens,
        threads: o.threads,
        batchInvariant: invariant,
      }, "cpu");
      try {
        await prefill(e, 64, o.batchTokens); // warm-up
        const pre: Record<number, { tok_s: number; ttft_ms: number }> = {};
        for (const n of o.prompts) pre[n] = await prefill(e, n, o.batchTokens);
        runs.push({ invariant, round, slots: await slotTable(e, o), prefill: pre });
        if (invariant && !churned) churned = await churn(e, 200);
      } finally {
        await e.close();
      }
    }
  }
  const med = (inv: boolean, f: (r: (typeof runs)[number]) => number) =>
    quantile(runs.filter((r) => r.invariant === inv).map(f), 0.5);
  const slots = Object.fromEntries(
    Object.keys(SLOT_PATTERNS).map((k) => [k, {
      on_ms: med(true, (r) => r.slots[k].ms),
      off_ms: med(false, (r) => r.slots[k].ms),
      on_passes: med(true, (r) => r.slots[k].passes),
      off_passes: med(false, (r) => r.slots[k].passes),
    }]),
  );
  const prefillRates = Object.fromEntries(o.prompts.map((n) => {
    const on = med(true, (r) => r.prefill[n].tok_s), off = med(false, (r) => r.prefill[n].tok_s);
    return [n, {
      on_tok_s: on,
      off_tok_s: off,
      ratio: on / off,
      ttft_on_ms: med(true, (r) => r.prefill[n].ttft_ms),
      ttft_off_ms: med(false, (r) => r.prefill[n].ttft_ms),
    }];
  }));
  return {
    model: o.modelPath,
    threads: o.threads,
    rounds: o.rounds,
    slots,
    churn: churned,
    prefill: prefillRates,
    runs,
  };
}

export function printKvPool(r: Awaited<ReturnType<typeof benchKvPool>>): string {
  const lines = [`KV pool, ${r.model} (${r.threads} thread(s), median of ${r.rounds} rounds)`, ""];
  lines.push("| slots in the batch | invariance on, ms a step | passes | off, ms a step | passes |");
  lines.push("| --- | --- | --- | --- | --- |");
  for (const [k, v] of Object.entries(r.slots)) {
    lines.push(
      `| ${k} | ${v.on_ms.toFixed(1)} | ${v.on_passes} | ${v.off_ms.toFixed(1)} | ${v.off_passes} |`,
    );
  }
  if (r.churn) {
    lines.push(
      "",
      `churn: ${r.churn.calls} calls of 2-16 decode steps, ${
        r.churn.passes_per_call.toFixed(3)
      } graph passes a call (most ${r.churn.max})`,
    );
  }
  lines.push(
    "",
    "| prompt | prefill on, tok/s | off, tok/s | on/off | TTFT on, ms | TTFT off, ms |",
    "| --- | --- | --- | --- | --- | --- |",
  );
  for (const [n, v] of Object.entries(r.prefill)) {
    lines.push(
      `| ${n} | ${v.on_tok_s.toFixed(1)} | ${v.off_tok_s.toFixed(1)} | ${v.ratio.toFixed(3)} | ${
        v.ttft_on_ms.toFixed(0)
      } | ${v.ttft_off_ms.toFixed(0)} |`,
    );
  }
  return lines.join("\n");
}
