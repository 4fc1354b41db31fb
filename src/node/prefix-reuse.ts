// What a shard does with prefix blocks: checks a peer's blocks (never trusting their sizes),
// keys its entries by them and its lineage, and passes its own lineage on. Only a shard whose
// results do not depend on the batch (an ordered KV pool: batch-invariant CPU and WebGPU) keeps
// and reuses prefixes: there a reused prefix gives the answer the cold prompt gives, bit for bit.
import type { PrefixBlocks } from "../gen/strata/seam/v1/seam_pb.ts";
import type { EngineMemory } from "../engine/range-engine.ts";
import { blockKey, MAX_PREFIX_BLOCKS } from "../route/prefix-keys.ts";
import type { PrefixKey } from "../scheduler/prefix-entries.ts";
import { SeamError } from "../seam/errors.ts";

const HASH_BYTES = 32;
const MAX_BLOCK_TOKENS = 4096;

/** The key of `p`'s blocks for a shard whose input came through `lineage`. */
export function prefixKeyOf(p: PrefixBlocks, lineage: Uint8Array): PrefixKey {
  if (!(p.blockTokens > 0 && p.blockTokens <= MAX_BLOCK_TOKENS)) {
    throw new SeamError("malformed", `prefix blocks of ${p.blockTokens} tokens`);
  }
  if (p.blocks.length > MAX_PREFIX_BLOCKS) {
    throw new SeamError("too_large", `${p.blocks.length} prefix blocks (at most ${MAX_PREFIX_BLOCKS})`);
  }
  if (p.blocks.some((b) => b.length !== HASH_BYTES) || p.lineage.length > HASH_BYTES) {
    throw new SeamError("malformed", "a prefix block or lineage is not a sha256");
  }
  return { lineage: blockKey(lineage), blocks: p.blocks.map(blockKey), blockTokens: p.blockTokens };
}

/** Whether an engine (by its label, engineLabel) gives results the same whatever the batch: prefixes are reused only there. */
export const reusesPrefixes = (label: string, m: Pick<EngineMemory, "kvLayout">): boolean =>
  m.kvLayout === "ordered" && /-(cpu|webgpu)$/.test(label);
