// A node's own decode rate for its range, advertised to the tracker (route cost): measured
// right after load, the same way on every runtime.
import type { RangeEngine } from "../engine/range-engine.ts";

/** Tokens a second one session gets through this range: 16 decode steps on a scratch sequence. */
export async function measureDecode(engine: RangeEngine, steps = 16): Promise<number> {
  const seq = engine.openSequence();
  try {
    const one = Int32Array.of(seq);
    const t0 = performance.now();
    for (let i = 0; i < steps; i++) {
      const input = engine.input === "tokens"
        ? { tokens: Int32Array.of(1 + i) }
        : { hidden: Float32Array.from({ length: engine.facts.nEmbd }, (_, k) => Math.sin(k + i)) };
      await engine.decode({ ...input, seq: one, pos: Int32Array.of(i), outputs: Uint8Array.of(1) });
    }
    return steps / ((performance.now() - t0) / 1000);
  } finally {
    await engine.releaseSequence(seq);
  }
}
