// A node's own decode rate for its range, advertised to the tracker (route cost, placement):
// measured right after load, the same way on every runtime. Later its traffic measures it
// again (the batcher's one-token batches), and the tracker keeps that when it differs much.
import type { RangeEngine, SeqId } from "../engine/range-engine.ts";

/**
 * Tokens a second one session gets through this range: rounds of decode steps on a scratch
 * sequence, the best round counting (another process loading beside this one slows a round,
 * never speeds one up). Up to `rounds`, fewer once `budgetMs` has gone (big ranges are slow).
 */
export async function measureDecode(
  engine: RangeEngine,
  o: { rounds?: number; steps?: number; budgetMs?: number } = {},
): Promise<number> {
  const { rounds = 4, steps = 8, budgetMs = 2_000 } = o;
  const began = performance.now();
  let best = 0;
  for (let r = 0; r < rounds && (r === 0 || performance.now() - began < budgetMs); r++) {
    best = Math.max(best, await round(engine, steps, r));
  }
  return best;
}

async function round(engine: RangeEngine, steps: number, salt: number): Promise<number> {
  const seq = engine.openSequence();
  try {
    const one = Int32Array.of(seq);
    const t0 = performance.now();
    for (let i = 0; i < steps; i++) {
      const input = engine.input === "tokens"
        ? { tokens: Int32Array.of(1 + i + salt) }
        : { hidden: Float32Array.from({ length: engine.facts.seamWidth }, (_, k) => Math.sin(k + i + salt)) };
      await engine.decode({ ...input, seq: one, pos: Int32Array.of(i), outputs: Uint8Array.of(1) });
    }
    return steps / ((performance.now() - t0) / 1000);
  } finally {
    await engine.releaseSequence(seq);
  }
}

/** The batch a node times at load, at most: a whole batch of its sessions, or this many. */
export const MEASURED_BATCH = 16;

/**
 * One decode step of `n` sessions in one batch, ms (the cohort rule's `batchMs`): scratch
 * sequences from position 0, steps of one token each, the mean of all but the first (which may
 * pay for first-use buffers), as measureDecode takes a mean over a round. At least two steps,
 * more while `budgetMs` lasts. Undefined where the engine gives fewer than two sequences, or
 * its KV pool holds fewer than two such steps.
 */
export async function measureBatch(
  engine: RangeEngine,
  n: number,
  o: { steps?: number; budgetMs?: number } = {},
): Promise<{ sessions: number; ms: number } | undefined> {
  const { steps = 4, budgetMs = 10_000 } = o;
  const seqs: SeqId[] = [];
  try {
    while (seqs.length < n) seqs.push(engine.openSequence());
  } catch {
    // kv_full: as many as it gives
  }
  try {
    const k = seqs.length;
    if (k < 2) return undefined;
    const seq = Int32Array.from(seqs);
    const outputs = new Uint8Array(k).fill(1);
    const width = engine.facts.seamWidth;
    const began = performance.now();
    const ms: number[] = [];
    try {
      for (let i = 0; i < steps && (i < 2 || performance.now() - began < budgetMs); i++) {
        const input = engine.input === "tokens"
          ? { tokens: Int32Array.from({ length: k }, (_, s) => 1 + i + s) }
          : { hidden: Float32Array.from({ length: k * width }, (_, x) => Math.sin(x + i)) };
        const t0 = performance.now();
        await engine.decode({ ...input, seq, pos: new Int32Array(k).fill(i), outputs });
        ms.push(performance.now() - t0);
      }
    } catch {
      // a KV pool too small for the scratch steps: what was timed, if enough
    }
    if (ms.length < 2) return undefined;
    const later = ms.slice(1);
    return { sessions: k, ms: later.reduce((a, b) => a + b, 0) / later.length };
  } finally {
    for (const s of seqs) await engine.releaseSequence(s);
  }
}
