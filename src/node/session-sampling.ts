// What the last shard samples for a Route Session: the policy its OPEN sent, the penalties over
// what it sampled before, and its grammar, made at OPEN, which rejects tokens before the choice.
import type { Open } from "../gen/strata/seam/v1/seam_pb.ts";
import type { RangeEngine } from "../engine/range-engine.ts";
import { adjusted, chooseAdjusted } from "../sampling/sampler.ts";
import { SessionGrammar } from "../sampling/session-grammar.ts";
import { SeamError } from "../seam/errors.ts";
import type { NodeSession } from "./node-session.ts";
import { errorText } from "./replies.ts";

/** the most alternatives a step's logprobs name (OpenAI's top_logprobs bound) */
const MAX_TOP_LOGPROBS = 20;
/** a chat format's generation prompt, which a grammar reads first: a few tokens */
const MAX_GRAMMAR_PREFILL = 4096;

/** The session's grammar, ready: one the engine refuses (or its history) fails the OPEN, before any step. */
export async function openGrammar(s: NodeSession, open: Open, engine: RangeEngine): Promise<void> {
  const g = open.sampling!.grammar!;
  if (g.prefill.length > MAX_GRAMMAR_PREFILL) {
    throw new SeamError("too_large", `a grammar prefill of ${g.prefill.length} tokens`);
  }
  const spec = { gbnf: g.gbnf, triggerPatterns: g.triggerPatterns, triggerTokens: g.triggerTokens };
  s.grammar = new SessionGrammar(() => engine.grammar(spec), [
    ...g.prefill,
    ...open.sampling!.history,
  ]);
  try {
    await s.grammar.ready();
  } catch (e) {
    void s.grammar.close();
    throw new SeamError("malformed", errorText(e));
  }
}

/** The session's token at `position`: its penalties count what it sampled before there. */
export function sampleNow(s: NodeSession, raw: Float32Array, position: number) {
  const { policy, logits } = adjust(s, raw, position);
  const c = chooseAdjusted(logits, policy, position);
  if (penalized(s)) s.sampledAt.set(position, c.token);
  return c;
}

/** sampleNow under the session's grammar, which rejects tokens before the choice. */
export async function sampleUnderGrammar(s: NodeSession, raw: Float32Array, position: number) {
  const { policy, logits } = adjust(s, raw, position);
  if (!(policy?.temperature! > 0) && !policy?.logprobs && !policy?.topLogprobs) {
    // greedy: the best token, if the grammar allows it, is the best of those it allows (and its
    // margin over the runner-up of all tokens is no larger than over the allowed one's)
    const c = chooseAdjusted(logits, policy, position);
    if (await s.grammar!.offer(position, c.token)) {
      if (penalized(s)) s.sampledAt.set(position, c.token);
      return c;
    }
  }
  const masked = logits === raw ? raw.slice() : logits;
  await s.grammar!.mask(masked, position);
  const c = chooseAdjusted(masked, policy, position);
  await s.grammar!.accept(position, c.token);
  if (penalized(s)) s.sampledAt.set(position, c.token);
  return c;
}

/** Only a penalized session keeps its tokens: the others pay nothing per token for it. */
function penalized(s: NodeSession): boolean {
  const p = s.open.sampling;
  return !!p && !!(p.presencePenalty || p.frequencyPenalty || p.repeatPenalty);
}

function adjust(s: NodeSession, raw: Float32Array, position: number) {
  const policy = s.open.sampling;
  const earlier: number[] = [];
  if (penalized(s)) { for (const [at, t] of s.sampledAt) if (at < position) earlier.push(t); }
  // a peer's sizes are not trusted: OpenAI's bound on alternatives
  const bounded = policy && policy.topLogprobs > MAX_TOP_LOGPROBS
    ? { ...policy, topLogprobs: MAX_TOP_LOGPROBS }
    : policy;
  return { policy: bounded, logits: adjusted(raw, bounded, earlier) };
}
