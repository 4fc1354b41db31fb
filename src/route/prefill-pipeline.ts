// How a route's driver cuts a prompt. A route's shards work one after another on a prompt
// sent whole; cut into chunks, the first shard runs chunk 2 while the next runs chunk 1, so
// prefill takes about the slowest shard's share instead of the sum of all of them. That pays
// only where an engine's cost grows with the tokens in a batch (CPUs); a GPU takes 16 tokens
// in about the time of 64, so its routes keep whole chunks.
import { costsPerToken } from "../engine/recipe.ts";
import { PREFILL_CHUNK_TOKENS } from "../seam/limits.ts";

/** The smallest chunk cut for a pipeline: below it, what each chunk costs besides its tokens
 *  (a pass over the weights, crossings) eats the overlap. */
export const PIPELINE_MIN_CHUNK = 16;
/** Chunks a prompt is cut into at most (longer prompts take the usual 256-token chunks). */
const PIPELINE_CHUNKS = 8;

/**
 * The smallest chunk worth cutting a prompt into on a route of these engines: 0 (never cut
 * below the usual chunk) unless every hop pays per token, and a route of one shard has
 * nothing to overlap.
 */
export function pipelineChunkFloor(engines: readonly string[]): number {
  return engines.length >= 2 && engines.every(costsPerToken) ? PIPELINE_MIN_CHUNK : 0;
}

/**
 * Tokens in each prefill chunk of an n-token prompt, for a route whose floor is `floor`: as
 * many equal chunks as fit the floor, up to 8. A chunk costs each shard a pass over its weights
 * besides its tokens, so a prompt under two floors stays whole (SmolLM2 on 2 shards: 24
 * tokens as 16 + 8 took 52.9 ms against 49.6 whole; 32 as 16 + 16, 51.6 against 63.3).
 */
export function prefillChunkFor(n: number, floor: number): number {
  if (floor <= 0) return PREFILL_CHUNK_TOKENS;
  const chunks = Math.min(PIPELINE_CHUNKS, Math.max(1, Math.floor(n / floor)));
  return Math.min(PREFILL_CHUNK_TOKENS, Math.ceil(n / chunks));
}
