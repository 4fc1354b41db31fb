// The last shard's choice of token from its logits, under the policy sent at session open.
//
// Order of the transforms (what `logprobs` report is taken after the third):
//   1. logit_bias: added to its tokens' logits (-100 bans a token);
//   2. penalties over the tokens this session generated before this position: repeat_penalty
//      (llama.cpp's: a positive logit divided by it, a negative one multiplied), then
//      frequency_penalty per occurrence and presence_penalty once (OpenAI's);
//   3. a grammar (constrained decoding) rejects what it does not allow next (-Infinity), at the
//      node, between 2 and 4 (session-grammar.ts; `chooseAdjusted` takes the logits from there);
//   4. greedy (temperature 0) takes the best; otherwise temperature, top-k, top-p, min-p, and
//      a draw that depends on the seed and the position only (batch-invariant, reproducible).
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
  /** 0 = off */
  readonly minP?: number;
  /** 0 = off */
  readonly presencePenalty?: number;
  /** 0 = off */
  readonly frequencyPenalty?: number;
  /** 0 or 1 = off */
  readonly repeatPenalty?: number;
  readonly logitBias?: { [token: number]: number };
  /** tokens generated before this route took the session over (a repair) */
  readonly history?: number[];
  readonly logprobs?: boolean;
  /** 0–20 */
  readonly topLogprobs?: number;
  /** what every sampled token must follow (the node's engine applies it: session-grammar.ts) */
  readonly grammar?: GrammarPolicy;
}

/** The protobuf Grammar: llama.cpp's grammar, lazy with triggers, fed `prefill` first. */
export interface GrammarPolicy {
  readonly gbnf: string;
  readonly triggerPatterns?: string[];
  readonly triggerTokens?: number[];
  readonly prefill?: number[];
}

export interface TokenLogprob {
  readonly token: number;
  readonly logprob: number;
}

export interface Choice {
  readonly token: number;
  /**
   * How far the choice was from going another way: greedy, the gap between the two best
   * logits; sampled, the distance of the draw from its token's probability interval edges.
   */
  readonly margin: number;
  /** with `logprobs`: the chosen token's log-probability (after bias and penalties) */
  readonly logprob?: number;
  /** with `topLogprobs`: the likeliest tokens, best first */
  readonly top?: TokenLogprob[];
}

/** Logits more than this many temperature units below the best carry < e^-40 of the mass. */
const CUTOFF = 40;

/** A logit_bias this low bans its token, as OpenAI's -100 does. */
const BAN = -100;

/**
 * Chooses the token at `position`; `generated` counts the tokens this session sampled so far
 * (with `policy.history`) for the penalties.
 */
export function choose(
  raw: Float32Array,
  policy: Policy | undefined,
  position: number,
  generated: readonly number[] = [],
): Choice {
  return chooseAdjusted(adjusted(raw, policy, generated), policy, position);
}

/** `choose` on logits already through the bias, the penalties and any grammar. */
export function chooseAdjusted(logits: Float32Array, policy: Policy | undefined, position: number): Choice {
  const choice = pick(logits, policy, position);
  if (!policy || (!policy.logprobs && !policy.topLogprobs)) return choice;
  return { ...choice, ...logprobsOf(logits, choice.token, policy.topLogprobs ?? 0) };
}

/** The logits after logit_bias and the penalties (the same array when neither applies). */
export function adjusted(raw: Float32Array, policy: Policy | undefined, generated: readonly number[]) {
  const bias = policy?.logitBias ?? {};
  const biased = Object.keys(bias);
  const rp = policy?.repeatPenalty && policy.repeatPenalty !== 1 ? policy.repeatPenalty : 0;
  const fp = policy?.frequencyPenalty ?? 0;
  const pp = policy?.presencePenalty ?? 0;
  const history = policy?.history ?? [];
  const penalize = (rp || fp || pp) && (generated.length || history.length);
  if (!biased.length && !penalize) return raw;
  const out = Float32Array.from(raw);
  for (const k of biased) {
    const t = Number(k);
    if (t >= 0 && t < out.length) out[t] = bias[t] <= BAN ? -Infinity : out[t] + bias[t];
  }
  if (penalize) {
    const counts = new Map<number, number>();
    for (const t of history) counts.set(t, (counts.get(t) ?? 0) + 1);
    for (const t of generated) counts.set(t, (counts.get(t) ?? 0) + 1);
    for (const [t, n] of counts) {
      if (t < 0 || t >= out.length) continue;
      let l = out[t];
      if (rp) l = l > 0 ? l / rp : l * rp;
      out[t] = l - fp * n - pp;
    }
  }
  return out;
}

function pick(logits: Float32Array, policy: Policy | undefined, position: number): Choice {
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
  }
  // min-p: candidates at least min_p times as likely as the best (probs[0] = 1 here)
  const minP = policy!.minP ?? 0;
  if (minP > 0) { while (keep > 1 && probs[keep - 1] < minP) keep--; }
  if (keep < probs.length) total = probs.slice(0, keep).reduce((s, q) => s + q, 0);
  const u = uniformAt(policy!.seed, position);
  let lo = 0;
  for (let j = 0; j < keep; j++) {
    const hi = j === keep - 1 ? 1 : lo + probs[j] / total;
    if (u < hi) return { token: cand[j], margin: Math.min(u - lo, hi - u) };
    lo = hi;
  }
  return { token: cand[keep - 1], margin: 0 };
}

/** log-softmax of `logits` at `token`, and the `top` likeliest tokens by it, best first. */
export function logprobsOf(logits: Float32Array, token: number, top: number) {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  const lse = max + Math.log(sum);
  const best: number[] = [];
  if (top > 0) {
    // a short list kept in order (top is at most 20); ties keep the lower id first
    for (let i = 0; i < logits.length; i++) {
      if (best.length < top) best.push(i);
      else if (logits[i] > logits[best[top - 1]]) best[top - 1] = i;
      else continue;
      for (let j = best.length - 1; j > 0 && logits[best[j - 1]] < logits[best[j]]; j--) {
        [best[j - 1], best[j]] = [best[j], best[j - 1]];
      }
    }
  }
  return {
    logprob: logits[token] - lse,
    top: best.map((i) => ({ token: i, logprob: logits[i] - lse })),
  };
}
