// What a range holds, layer by layer: KV widths and sliding windows from the header, the trunk
// apart from nextn (MTP) layers, and the cells llama.cpp gives a sliding-window layer.
import { describe, expect, it } from "vitest";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { buildManifest, shardBytes } from "../../src/gguf/manifest.ts";
import { parseGgufHeader, trunkLayers } from "../../src/gguf/reader.ts";
import { GgmlType } from "../../src/gguf/types.ts";
import { type MetadataEntry, writeGguf } from "../../src/gguf/writer.ts";
import { rangeMemory } from "../../src/engine/memory-cap.ts";
import { isSynthetic, synthModel } from "../../src/model/synth.ts";

const ARTIFACT = "a".repeat(64);
const f32 = (name: string, n: number) => ({
  name,
  shape: [n],
  type: GgmlType.F32,
  data: new Uint8Array(4 * n),
});

describe("the KV layout of a model", () => {
  it("Gemma 3: key_length × kv heads wide, every n-th layer global, the rest in a window", () => {
    const h = parseGgufHeader(synthModel({ arch: "gemma3", nEmbd: 64, nHead: 4, nHeadKv: 1, headDim: 32 }));
    const shape = kvShape(h);
    // pattern 3, window 8: layers 2 and 5 see everything
    expect(shape.layers.map((l) => l.window)).toEqual([8, 8, 0, 8, 8, 0]);
    // head width 32 with 1 KV head: 32 wide, not n_embd × kv/heads = 16
    expect(shape.layers[0]).toMatchObject({ k: 32, v: 32 });
  });

  it("reads a per-layer sliding-window pattern and Gemma 3's default of 6", () => {
    const base: MetadataEntry[] = [
      ["general.architecture", "gemma3"],
      ["gemma3.block_count", 7, "u32"],
      ["gemma3.embedding_length", 64, "u32"],
      ["gemma3.attention.head_count", 4, "u32"],
      ["gemma3.attention.sliding_window", 512, "u32"],
    ];
    const byDefault = kvShape(parseGgufHeader(writeGguf({ metadata: base, tensors: [] })));
    expect(byDefault.layers.map((l) => l.window)).toEqual([512, 512, 512, 512, 512, 0, 512]);
    const flags = kvShape(parseGgufHeader(writeGguf({
      metadata: [...base, ["gemma3.attention.sliding_window_pattern", [
        true,
        false,
        true,
        false,
        true,
        false,
        true,
      ], {
        array: "bool",
      }]],
      tensors: [],
    })));
    expect(flags.layers.map((l) => l.window)).toEqual([512, 0, 512, 0, 512, 0, 512]);
  });

  it("sums each layer's own widths over the pool (windowed layers keep every cell)", () => {
    const swa = { k: 256, v: 256, window: 512 }, narrow = { k: 64, v: 64, window: 0 };
    const m = rangeMemory({ weightBytes: 0, kv: [swa, narrow], kvCells: 8192, streams: 4 });
    expect(m.kvBytes).toBe(8192 * (512 + 128) * 2);
  });
});

describe("nextn (MTP) layers", () => {
  const file = writeGguf({
    metadata: [
      ["general.architecture", "glm4moe"],
      ["glm4moe.block_count", 4, "u32"],
      ["glm4moe.nextn_predict_layers", 1, "u32"],
      ["glm4moe.embedding_length", 8, "u32"],
    ],
    tensors: [
      f32("token_embd.weight", 16),
      ...[0, 1, 2, 3].map((i) => f32(`blk.${i}.attn_norm.weight`, 8)),
      f32("blk.3.nextn.eh_proj.weight", 8),
      f32("output_norm.weight", 8),
    ],
  });
  const h = parseGgufHeader(file);

  it("are not part of the trunk a split cuts", () => {
    expect(trunkLayers(h)).toBe(3);
    expect(kvShape(h).layers).toHaveLength(3);
  });

  it("go with the output head: the last range loads them, no other does", () => {
    const m = buildManifest(h, file.length, ARTIFACT);
    expect(m.nLayer).toBe(3);
    expect(m.tensors.filter((t) => t.layer === 3).every((t) => t.role === "output")).toBe(true);
    const names = (a: number, b: number) => shardBytes(m, a, b).tensors.map((t) => t.name);
    expect(names(1, 3)).toEqual(
      expect.arrayContaining(["blk.3.attn_norm.weight", "blk.3.nextn.eh_proj.weight"]),
    );
    expect(names(0, 2).some((n) => n.startsWith("blk.3."))).toBe(false);
  });

  it("refuses a header with no trunk left", () => {
    const bad = writeGguf({
      metadata: [["general.architecture", "x"], ["x.block_count", 2, "u32"], [
        "x.nextn_predict_layers",
        2,
        "u32",
      ]],
      tensors: [],
    });
    expect(() => trunkLayers(parseGgufHeader(bad))).toThrow(/nextn_predict_layers/);
  });
});

it("tells a synthetic model from a real one by its name", () => {
  expect(isSynthetic(parseGgufHeader(synthModel({ arch: "llama" })))).toBe(true);
  expect(
    isSynthetic(parseGgufHeader(writeGguf({ metadata: [["general.name", "Gemma 3 270m"]], tensors: [] }))),
  )
    .toBe(false);
});
