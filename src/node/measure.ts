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
 * One decode step of one session and of `n` sessions in one batch, ms (the cohort rule's
 * `oneMs` and `batchMs`): scratch sequences from position 0, steps of one token each, the two
 * kinds in alternation so that both see the engine equally warm (a tab's first steps run
 * baseline WASM code: timed apart, its one step came out slower than its batch of 8), the mean
 * of all but the first of each (which may pay for first-use buffers). At least two of each, more
 * while `budgetMs` lasts (short: every node start pays it, a WASM node's or a tab's most). Undefined where the engine gives fewer than two sequences, or its KV
 * pool holds fewer than two such steps.
 */
export async function measureBatch(
  engine: RangeEngine,
  n: number,
  o: { steps?: number; budgetMs?: number } = {},
): Promise<{ sessions: number; ms: number; oneMs: number } | undefined> {
  const { steps = 4, budgetMs = 3_000 } = o;
  const seqs: SeqId[] = [];
  try {
    while (seqs.length < n) seqs.push(engine.openSequence());
  } catch {
    // kv_full: as many as it gives
  }
  try {
    const k = seqs.length;
    if (k < 2) return undefined;
    const pos = new Int32Array(k);
    const width = engine.facts.seamWidth;
    const step = async (members: number, salt: number): Promise<number> => {
      const input = engine.input === "tokens"
        ? { tokens: Int32Array.from({ length: members }, (_, s) => 1 + salt + s) }
        : { hidden: Float32Array.from({ length: members * width }, (_, x) => Math.sin(x + salt)) };
      const t0 = performance.now();
      await engine.decode({
        ...input,
        seq: Int32Array.from(seqs.slice(0, members)),
        pos: pos.slice(0, members),
        outputs: new Uint8Array(members).fill(1),
      });
      const ms = performance.now() - t0;
      for (let s = 0; s < members; s++) pos[s]++;
      return ms;
    };
    const began = performance.now();
    const one: number[] = [];
    const batch: number[] = [];
    try {
      for (let i = 0; i < steps && (i < 2 || performance.now() - began < budgetMs); i++) {
        one.push(await step(1, i));
        batch.push(await step(k, i));
      }
    } catch {
      // a KV pool too small for the scratch steps: what was timed, if enough
    }
    if (batch.length < 2) return undefined;
    const mean = (ms: number[]) => ms.slice(1).reduce((a, b) => a + b, 0) / (ms.length - 1);
    return { sessions: k, ms: mean(batch), oneMs: mean(one.slice(0, batch.length)) };
  } finally {
    for (const s of seqs) await engine.releaseSequence(s);
  }
}
