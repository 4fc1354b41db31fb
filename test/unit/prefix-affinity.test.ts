// Prefix keys and the gateway's memory of where they were kept: two prompts share keys exactly
// as far as they share whole blocks, and a new prompt prefers the nodes that kept its longest.
import { describe, expect, it } from "vitest";
import { PrefixAffinity } from "../../src/gateway/prefix-affinity.ts";
import { blockKey, PREFIX_BLOCK_TOKENS as B, prefixBlocks } from "../../src/route/prefix-keys.ts";

const tokens = (n: number, from = 0) => Int32Array.from({ length: n }, (_, i) => from + i);

describe("prefix keys", () => {
  it("are shared as far as whole blocks are, and differ from the first block that does not", async () => {
    const a = await prefixBlocks(tokens(3 * B + 5));
    expect(a).toHaveLength(3);
    const b = tokens(3 * B);
    b[2 * B + 1] = 99_999; // the third block differs
    const kb = await prefixBlocks(b);
    expect(kb.slice(0, 2).map(blockKey)).toEqual(a.slice(0, 2).map(blockKey));
    expect(blockKey(kb[2])).not.toBe(blockKey(a[2]));
    // a block is keyed by what came before it too
    const shifted = await prefixBlocks(tokens(2 * B, 1));
    expect(blockKey(shifted[1])).not.toBe(blockKey(a[1]));
    expect(await prefixBlocks(tokens(B - 1))).toEqual([]);
  });
});

describe("prefix affinity", () => {
  it("names the nodes that kept the longest of a prompt's blocks, and forgets the oldest past its bound", async () => {
    const aff = new PrefixAffinity(3);
    const conversation = tokens(3 * B + 10);
    aff.kept(await prefixBlocks(conversation), ["a0", "a1"]);
    // the next turn extends it: the same nodes
    expect(await aff.nodesFor(tokens(5 * B))).toEqual(["a0", "a1"]);
    // another conversation shares its first block only, kept elsewhere later
    const other = tokens(2 * B + 3);
    other[B + 2] = 77_777;
    aff.kept(await prefixBlocks(other), ["b0", "b1"]);
    expect(await aff.nodesFor(tokens(5 * B))).toEqual(["a0", "a1"]);
    expect(await aff.nodesFor(Int32Array.from([...other.subarray(0, 2 * B), 1]))).toEqual(["b0", "b1"]);
    // nothing shared, or too short to share a block
    expect(await aff.nodesFor(tokens(4 * B, 5))).toEqual([]);
    expect(await aff.nodesFor(tokens(B))).toEqual([]);
    // bounded: three blocks remembered, the least recently kept gone (the conversation's second;
    // its first was kept again, by the other)
    expect(await aff.nodesFor(Int32Array.from([...conversation.subarray(0, 2 * B), 1]))).toEqual([
      "b0",
      "b1",
    ]);
  });
});
