import { describe, expect, it } from "vitest";
import { rangeFile } from "../../src/artifact/compact-shard.ts";
import { readSparse } from "../../src/artifact/sparse.ts";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { writeGguf } from "../../src/gguf/writer.ts";
import { GgmlType } from "../../src/gguf/types.ts";

/** Four layers of distinct bytes, an embedding, a norm and (untied) a head. */
function model(tied: boolean): Uint8Array {
  const t = (name: string, n: number, fill: number) => ({
    name,
    shape: [n],
    type: GgmlType.F32,
    data: new Uint8Array(new Float32Array(n).fill(fill).buffer),
  });
  return writeGguf({
    metadata: [["general.architecture", "llama"], ["llama.block_count", 4, "u32"], ["general.name", "x"]],
    tensors: [
      t("token_embd.weight", 16, 100),
      ...Array.from({ length: 4 }, (_, i) => t(`blk.${i}.attn_norm.weight`, 8 + i, i)),
      t("output_norm.weight", 4, 200),
      ...(tied ? [] : [t("output.weight", 16, 300)]),
    ],
  });
}

/** The tensors of a file, by name, as float arrays. */
function tensorsOf(file: Uint8Array): Map<string, number[]> {
  const h = parseGgufHeader(file, { fileSize: file.length });
  return new Map(
    h.tensors.map((t) => [t.name, [...new Float32Array(file.slice(t.offset, t.offset + t.size).buffer)]]),
  );
}

const whole = (m: { size: number; spans: ReadonlyArray<{ offset: number; bytes: Uint8Array }> }) => {
  const out = new Uint8Array(m.size);
  readSparse(m, out, 0, m.size);
  return out;
};

describe("a range's own shard file", () => {
  it("keeps the metadata and only the range's tensors, packed, with their bytes", () => {
    const file = model(false);
    const all = tensorsOf(file);
    const mid = whole(rangeFile(file, { start: 1, end: 3 })!);
    const h = parseGgufHeader(mid, { fileSize: mid.length });
    expect(h.metadata.get("general.name")?.value).toBe("x");
    expect(h.metadata.get("llama.block_count")?.value).toBe(4);
    const got = tensorsOf(mid);
    expect([...got.keys()]).toEqual(["blk.1.attn_norm.weight", "blk.2.attn_norm.weight"]);
    for (const [name, values] of got) expect(values).toEqual(all.get(name));
    // the first range carries the embedding, the last the norm and head
    expect([...tensorsOf(whole(rangeFile(file, { start: 0, end: 1 })!)).keys()]).toEqual([
      "token_embd.weight",
      "blk.0.attn_norm.weight",
    ]);
    expect([...tensorsOf(whole(rangeFile(file, { start: 3, end: 4 })!)).keys()]).toEqual([
      "blk.3.attn_norm.weight",
      "output_norm.weight",
      "output.weight",
    ]);
  });

  it("gives the last range the tied embedding as its head, and reads a sparse download the same", () => {
    const file = model(true);
    const last = whole(rangeFile(file, { start: 2, end: 4 })!);
    expect([...tensorsOf(last).keys()]).toContain("token_embd.weight");
    // a download holds the header and the range's bytes only, at the artifact's offsets
    const h = parseGgufHeader(file, { fileSize: file.length });
    const keep = h.tensors.filter((t) => /^blk\.[23]\.|^token_embd|^output_norm/.test(t.name));
    const sparse = {
      size: file.length,
      spans: [
        { offset: 0, bytes: file.slice(0, h.dataOffset) },
        ...keep.map((t) => ({ offset: t.offset, bytes: file.slice(t.offset, t.offset + t.size) })),
      ],
    };
    expect(whole(rangeFile(sparse, { start: 2, end: 4 })!)).toEqual(last);
  });

  it("leaves bytes that are no GGUF, and a range the model lacks, to the loader", () => {
    expect(rangeFile(new Uint8Array(64), { start: 0, end: 1 })).toBeUndefined();
    expect(rangeFile(model(false), { start: 2, end: 9 })).toBeUndefined();
  });
});
