import { describe, expect, it } from "vitest";
import type { Manifest, ManifestTensor } from "../../src/gguf/manifest.ts";
import { decodeWork } from "../../src/tracker/placement/decode-work.ts";

const tensor = (
  name: string,
  layer: number | null,
  role: ManifestTensor["role"],
  shape: number[],
  size: number,
) => ({
  name,
  layer,
  role,
  type: 0,
  typeName: "q",
  shape,
  offset: 0,
  size,
});

/** Two layers of 4 × 8 weights (bytes as a 4-bit type), a vocabulary of 16 × 8 (bytes as an 8-bit type). */
function manifest(tied: boolean): Manifest {
  const tensors: ManifestTensor[] = [
    tensor("token_embd.weight", null, "input", [8, 16], 128),
    tensor("blk.0.attn_q.weight", 0, "layer", [8, 4], 16),
    tensor("blk.1.attn_q.weight", 1, "layer", [8, 4], 16),
    tensor("output_norm.weight", null, "output", [8], 32),
    ...(tied ? [] : [tensor("output.weight", null, "output", [8, 16], 128)]),
  ];
  return {
    artifact: "0".repeat(64),
    arch: "llama",
    nLayer: 2,
    fileSize: 0,
    dataOffset: 0,
    tensors,
    layers: [16, 16],
    inputBytes: 128,
    outputBytes: tied ? 32 : 160,
    sharedBytes: 0,
    tiedEmbeddings: tied,
  } as Manifest;
}

describe("decode work", () => {
  it("counts the weights a step multiplies, whatever their bytes: layers, and the head on the last range", () => {
    for (const tied of [false, true]) {
      const work = decodeWork(manifest(tied));
      expect(work({ start: 0, end: 1 })).toBe(32);
      expect(work({ start: 0, end: 2 })).toBe(64 + 8 + 128);
      // the embedding lookup costs nothing; the head (or the tied embedding doing its job) goes last
      expect(work({ start: 1, end: 2 })).toBe(32 + 8 + 128);
    }
  });
});
