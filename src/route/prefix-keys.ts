// A token sequence as prefix keys: one hash per whole block of tokens, each over the one before
// and its block's tokens, so that two prompts share keys exactly as far as they share whole
// blocks of tokens (a system prompt shared by every user, a conversation's earlier turns). The
// owner of a route session computes them; shards key the KV they keep by them (and by their
// lineage: what computed their input), never seeing the tokens.
import { bytesToHex } from "../bytes/hex.ts";

/** Tokens per block: a prefix is reused in whole blocks. */
export const PREFIX_BLOCK_TOKENS = 64;
/** Most blocks a frame may carry (a 256K-token context of 64-token blocks). */
export const MAX_PREFIX_BLOCKS = 4096;

const SEED = new TextEncoder().encode("strata prefix blocks v1");

const sha256 = async (a: Uint8Array, b: Uint8Array): Promise<Uint8Array> => {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return new Uint8Array(await crypto.subtle.digest("SHA-256", joined));
};

/** The keys of `tokens`' whole blocks (of `blockTokens`), the first `limit` of them at most. */
export async function prefixBlocks(
  tokens: Int32Array,
  blockTokens = PREFIX_BLOCK_TOKENS,
  limit = MAX_PREFIX_BLOCKS,
): Promise<Uint8Array[]> {
  const n = Math.min(Math.floor(tokens.length / blockTokens), limit);
  const out: Uint8Array[] = [];
  let h: Uint8Array = SEED;
  for (let i = 0; i < n; i++) {
    const block = tokens.slice(i * blockTokens, (i + 1) * blockTokens);
    // little-endian int32s, whatever the host's order
    const bytes = new Uint8Array(block.length * 4);
    const v = new DataView(bytes.buffer);
    block.forEach((t, j) => v.setInt32(4 * j, t, true));
    h = await sha256(h, bytes);
    out.push(h);
  }
  return out;
}

/** The lineage a shard passes on: what it got, then its own recipe and range. */
export async function nextLineage(
  lineage: Uint8Array,
  recipe: Uint8Array,
  range: { readonly start: number; readonly end: number },
): Promise<Uint8Array> {
  const tail = new Uint8Array(recipe.length + 8);
  tail.set(recipe);
  const v = new DataView(tail.buffer);
  v.setUint32(recipe.length, range.start, true);
  v.setUint32(recipe.length + 4, range.end, true);
  return await sha256(lineage, tail);
}

/** Blocks as map keys. */
export const blockKey = (b: Uint8Array): string => bytesToHex(b);
