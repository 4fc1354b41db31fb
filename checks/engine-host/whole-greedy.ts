// Whole-model llama.cpp's greedy continuations of token prompts, in an engine process of its
// own: the yardstick of every check that chats through routes. Each prompt goes in as one
// batch, then one token a step; each step's top-2 gap (in σ of the logits) comes with it.
import { sigma, top2 } from "../../src/parity/compare.ts";
import { logprobsOf } from "../../src/sampling/sampler.ts";
import { EngineProcess } from "./engine-process.ts";
import type { Grammar } from "../../src/engine/range-engine.ts";

export interface GreedyStep {
  readonly token: number;
  /** the whole model's top-2 gap at this step, in σ of its logits */
  readonly gapSigma: number;
  /** log-softmax of the whole model's logits at the token */
  readonly logprob: number;
}

export interface GreedyOptions {
  /** a token whose logit is -∞ at every step (OpenAI's logit_bias of -100) */
  readonly banned?: number;
  /** llama.cpp's grammar, fresh, for each prompt: every step keeps to it (structured output) */
  readonly grammar?: () => Grammar;
}

/** Per prompt, the greedy steps up to `newTokens` or the first token `isEnd` says ends it (kept). */
export async function wholeGreedy(
  modelPath: string,
  prompts: readonly Int32Array[],
  newTokens: number,
  isEnd: (token: number) => boolean,
  o: GreedyOptions = {},
): Promise<GreedyStep[][]> {
  const longest = Math.max(...prompts.map((p) => p.length));
  const whole = await EngineProcess.spawn({
    modelPath,
    range: "whole",
    kvCells: Math.max(512, longest + newTokens + 8),
    maxSequences: 1,
    batchTokens: Math.max(512, longest),
    threads: 2,
    backend: "cpu",
  });
  try {
    const all: GreedyStep[][] = [];
    for (const ids of prompts) {
      const seq = await whole.open();
      const grammar = o.grammar?.();
      const steps: GreedyStep[] = [];
      let input = ids;
      let at = 0;
      for (let i = 0; i < newTokens; i++) {
        const n = input.length;
        const r = await whole.decode(
          input,
          Int32Array.from({ length: n }, (_, k) => at + k),
          new Int32Array(n).fill(seq),
          Uint8Array.from({ length: n }, (_, k) => (k === n - 1 ? 1 : 0)),
        );
        if (o.banned !== undefined) r.data[o.banned] = -Infinity;
        await grammar?.mask(r.data);
        const best = top2(r.data);
        await grammar?.accept(best.best);
        steps.push({
          token: best.best,
          gapSigma: best.gap / sigma(r.data),
          logprob: logprobsOf(r.data, best.best, 0).logprob,
        });
        if (isEnd(best.best)) break;
        at += n;
        input = Int32Array.of(best.best);
      }
      await whole.release(seq);
      await grammar?.close();
      all.push(steps);
    }
    return all;
  } finally {
    await whole.close();
  }
}
