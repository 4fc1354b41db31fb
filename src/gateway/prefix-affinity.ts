// Which nodes hold the KV of which prompt prefixes, as far as this gateway knows: the routes it
// released sessions on with their blocks kept. A new prompt asks the tracker for a route through
// the nodes that kept the longest of its blocks (prefix affinity); the tracker still gives
// another when that route is full. Bounded: the least recently kept blocks are forgotten first.
import { blockKey, PREFIX_BLOCK_TOKENS, prefixBlocks } from "../route/prefix-keys.ts";

/** Blocks remembered at most (a 2,000-token conversation keeps 31). */
const KEPT_BLOCKS = 65_536;

export class PrefixAffinity {
  // insertion order is recency: a block kept again moves to the end
  readonly #nodes = new Map<string, readonly string[]>();

  constructor(readonly limit = KEPT_BLOCKS) {}

  /** A route's nodes kept these blocks (a session's, released). */
  kept(blocks: readonly Uint8Array[], nodes: readonly string[]): void {
    for (const b of blocks) {
      const k = blockKey(b);
      this.#nodes.delete(k);
      this.#nodes.set(k, nodes);
    }
    for (const k of this.#nodes.keys()) {
      if (this.#nodes.size <= this.limit) break;
      this.#nodes.delete(k);
    }
  }

  /** The nodes that kept the longest run of `prompt`'s blocks (its last token left out, as the
   *  route session offers them); none when no block is known. */
  async nodesFor(prompt: Int32Array): Promise<readonly string[]> {
    if (this.#nodes.size === 0 || prompt.length <= PREFIX_BLOCK_TOKENS) return [];
    const blocks = await prefixBlocks(prompt.subarray(0, prompt.length - 1));
    for (let i = blocks.length - 1; i >= 0; i--) {
      const nodes = this.#nodes.get(blockKey(blocks[i]));
      if (nodes) return nodes;
    }
    return [];
  }
}
