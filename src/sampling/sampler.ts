// The last shard's choice of token from its logits, under the policy sent at session open.
import { uniformAt } from "./draw.ts";

/** The policy sent at session open (the protobuf Sampling message has this shape). */
export interface Policy {
  /** 0 = greedy */
  readonly temperature: number;
  /** 0 = off */
  readonly topK: number;
  /** 0 or 1 = off */
  readonly topP: number;
  readonly seed: bigint;
}

export interface Choice {
  readonly token: number;
  /**
   * How far the choice was from going another way: greedy, the gap between the two best
   * logits; sampled, the distance of the draw from its token's probability interval edges.
   */
  readonly margin: number;
}

/** Logits more than this many temperature units below the best carry < e^-40 of the mass. */
const CUTOFF = 40;

export function choose(logits: Float32Array, policy: Policy | undefined, position: number): Choice {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  const t = policy?.temperature ?? 0;
  if (!(t > 0)) {
    let second = -Infinity;
    for (let i = 0; i < logits.length; i++) if (i !== best && logits[i] > second) second = logits[i];
    return { token: best, margin: logits[best] - second };
  }
  // candidates in descending order; only those that can carry mass are sorted
  const floor = logits[best] - CUTOFF * t;
  const cand: number[] = [];
  for (let i = 0; i < logits.length; i++) if (logits[i] >= floor) cand.push(i);
  cand.sort((a, b) => logits[b] - logits[a] || a - b);
  const k = policy!.topK > 0 ? Math.min(policy!.topK, cand.length) : cand.length;
  const probs = cand.slice(0, k).map((i) => Math.exp((logits[i] - logits[best]) / t));
  let total = probs.reduce((s, p) => s + p, 0);
  // top-p: the smallest prefix whose mass reaches p
  const p = policy!.topP > 0 && policy!.topP < 1 ? policy!.topP : 1;
  let keep = probs.length;
  if (p < 1) {
    let acc = 0;
    for (let j = 0; j < probs.length; j++) {
      acc += probs[j] / total;
      if (acc >= p) {
        keep = j + 1;
        break;
      }
    }
    total = probs.slice(0, keep).reduce((s, q) => s + q, 0);
  }
  const u = uniformAt(policy!.seed, position);
  let lo = 0;
  for (let j = 0; j < keep; j++) {
    const hi = j === keep - 1 ? 1 : lo + probs[j] / total;
    if (u < hi) return { token: cand[j], margin: Math.min(u - lo, hi - u) };
    lo = hi;
  }
  return { token: cand[keep - 1], margin: 0 };
}
