// A node's own decode rate for its range, advertised to the tracker (route cost, placement):
// measured right after load, the same way on every runtime. Later its traffic measures it
// again (the batcher's one-token batches), and the tracker keeps that when it differs much.
import type { RangeEngine } from "../engine/range-engine.ts";

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
