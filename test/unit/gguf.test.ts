import { describe, expect, it } from "vitest";
import {
  arch,
  blockCount,
  GgufError,
  GgufNeedMoreBytes,
  metaNumber,
  metaString,
  parseGgufHeader,
} from "../../src/gguf/reader.ts";
import { type MetadataEntry, writeGguf } from "../../src/gguf/writer.ts";
import { readGgufHeader } from "../../src/gguf/read-header.ts";
import { buildManifest, formatManifest, sha256Hex, shardBytes } from "../../src/gguf/manifest.ts";
import {
  GgmlType,
  type GgufArray,
  GgufValueType,
  tensorBytes,
  tensorPlacement,
} from "../../src/gguf/types.ts";
import { SYNTH_ARCHS, synthModel } from "../../src/model/synth.ts";

const bytesOf = (values: number[]) => new Uint8Array(new Float32Array(values).buffer);
const SHA = "ab".repeat(32);

/** A small file with one tensor per layer, an embedding and (optionally) a head. */
function layeredModel(nLayer: number, tied: boolean): Uint8Array {
  const t = (name: string, n: number) => ({
    name,
    shape: [n],
    type: GgmlType.F32,
    data: bytesOf(new Array(n).fill(1)),
  });
  return writeGguf({
    metadata: [["general.architecture", "llama"], ["llama.block_count", nLayer, "u32"]],
    tensors: [
      t("token_embd.weight", 16),
      ...Array.from({ length: nLayer }, (_, i) => t(`blk.${i}.attn_norm.weight`, 8 + i)),
      t("output_norm.weight", 4),
      ...(tied ? [] : [t("output.weight", 16)]),
    ],
  });
}

/** Parses like a ranged reader would: start small, fetch at least what GgufNeedMoreBytes asks for. */
function parseByPrefixes(file: Uint8Array, first: number, grow: (have: number, needed: number) => number) {
  let have = first;
  const asked: number[] = [];
  for (;;) {
    try {
      return { header: parseGgufHeader(file.subarray(0, have)), asked };
    } catch (e) {
      if (!(e instanceof GgufNeedMoreBytes)) throw e;
      expect(e.needed).toBeGreaterThan(have);
      asked.push(e.needed);
      have = grow(have, e.needed);
    }
  }
}

function expectGgufError(bytes: Uint8Array, code: string, message: RegExp, fileSize?: number) {
  try {
    parseGgufHeader(bytes, fileSize === undefined ? {} : { fileSize });
  } catch (e) {
    expect(e).toBeInstanceOf(GgufError);
    expect(e).not.toBeInstanceOf(GgufNeedMoreBytes);
    expect((e as GgufError).code).toBe(code);
    expect((e as Error).message).toMatch(message);
    return;
  }
  throw new Error("expected a GgufError");
}

describe("GGUF writer → reader round trip", () => {
  const metadata: MetadataEntry[] = [
    ["general.architecture", "llama"],
    ["t.u8", 255, "u8"],
    ["t.i8", -128, "i8"],
    ["t.u16", 65535, "u16"],
    ["t.i16", -32768, "i16"],
    ["t.u32", 4294967295, "u32"],
    ["t.i32", -2147483648, "i32"],
    ["t.u64", 18446744073709551615n, "u64"],
    ["t.i64", -9223372036854775808n, "i64"],
    ["t.f32", 0.5, "f32"],
    ["t.f64", Math.PI, "f64"],
    ["t.bool", true, "bool"],
    ["t.string", "héllo, ĠGGUF ✓"],
    ["t.empty_string", ""],
    ["t.inferred_u32", 7],
    ["t.inferred_i32", -7],
    ["t.inferred_f32", 1.5],
    ["t.arr_i32", [1, -2, 3], { array: "i32" }],
    ["t.arr_f32_typed", new Float32Array([0.25, -1])],
    ["t.arr_str", ["a", "", "Ġthe"]],
    ["t.arr_bool", [true, false], { array: "bool" }],
    ["t.arr_u64", [1n, 2n], { array: "u64" }],
    ["t.arr_empty", [], { array: "string" }],
    ["t.nested", [[1, 2], ["x"]]],
  ];
  const f16 = new Uint8Array([0x00, 0x3c, 0x00, 0xc0]); // 1.0, -2.0
  const q8 = new Uint8Array(34).map((_, i) => i);
  const tensors = [
    { name: "token_embd.weight", shape: [2, 3], type: GgmlType.F32, data: bytesOf([1, 2, 3, 4, 5, 6]) },
    { name: "blk.0.attn_q.weight", shape: [2], type: GgmlType.F16, data: f16 },
    { name: "blk.1.ffn_up.weight", shape: [32, 1], type: GgmlType.Q8_0, data: q8 },
    { name: "output.weight", shape: [3], type: GgmlType.F32, data: bytesOf([7, 8, 9]) },
  ];

  for (const alignment of [undefined, 64]) {
    it(`keeps every metadata type and tensor (alignment ${alignment ?? "default"})`, () => {
      const file = writeGguf({ metadata, tensors, alignment });
      const h = parseGgufHeader(file, { fileSize: file.length });
      const a = alignment ?? 32;

      expect(h.version).toBe(3);
      expect(h.alignment).toBe(a);
      expect(h.metadata.size).toBe(metadata.length + (alignment === 64 ? 1 : 0));
      const kv = (k: string) => h.metadata.get(k)!;
      expect(kv("t.u8")).toMatchObject({ type: GgufValueType.UINT8, value: 255 });
      expect(kv("t.i8")).toMatchObject({ type: GgufValueType.INT8, value: -128 });
      expect(kv("t.u16")).toMatchObject({ type: GgufValueType.UINT16, value: 65535 });
      expect(kv("t.i16")).toMatchObject({ type: GgufValueType.INT16, value: -32768 });
      expect(kv("t.u32")).toMatchObject({ type: GgufValueType.UINT32, value: 4294967295 });
      expect(kv("t.i32")).toMatchObject({ type: GgufValueType.INT32, value: -2147483648 });
      expect(kv("t.u64")).toMatchObject({ type: GgufValueType.UINT64, value: 18446744073709551615n });
      expect(kv("t.i64")).toMatchObject({ type: GgufValueType.INT64, value: -9223372036854775808n });
      expect(kv("t.f32")).toMatchObject({ type: GgufValueType.FLOAT32, value: 0.5 });
      expect(kv("t.f64")).toMatchObject({ type: GgufValueType.FLOAT64, value: Math.PI });
      expect(kv("t.bool")).toMatchObject({ type: GgufValueType.BOOL, value: true });
      expect(metaString(h, "t.string")).toBe("héllo, ĠGGUF ✓");
      expect(metaString(h, "t.empty_string")).toBe("");
      expect(kv("t.inferred_u32").type).toBe(GgufValueType.UINT32);
      expect(kv("t.inferred_i32")).toMatchObject({ type: GgufValueType.INT32, value: -7 });
      expect(kv("t.inferred_f32")).toMatchObject({ type: GgufValueType.FLOAT32, value: 1.5 });
      expect(kv("t.arr_i32").value).toEqual({ elementType: GgufValueType.INT32, items: [1, -2, 3] });
      expect(kv("t.arr_f32_typed").value).toEqual({ elementType: GgufValueType.FLOAT32, items: [0.25, -1] });
      expect(kv("t.arr_str").value).toEqual({ elementType: GgufValueType.STRING, items: ["a", "", "Ġthe"] });
      expect(kv("t.arr_bool").value).toEqual({ elementType: GgufValueType.BOOL, items: [true, false] });
      expect(kv("t.arr_u64").value).toEqual({ elementType: GgufValueType.UINT64, items: [1n, 2n] });
      expect(kv("t.arr_empty").value).toEqual({ elementType: GgufValueType.STRING, items: [] });
      expect(kv("t.nested").value).toEqual({
        elementType: GgufValueType.ARRAY,
        items: [
          { elementType: GgufValueType.UINT32, items: [1, 2] },
          { elementType: GgufValueType.STRING, items: ["x"] },
        ],
      });
      expect(() => metaNumber(h, "t.u64")).toThrow(GgufError); // 2^64-1 does not fit a JS number
      expect(metaNumber(h, "t.u32")).toBe(4294967295);

      // data section and every tensor start on the alignment; bytes come back exactly
      expect(h.dataOffset % a).toBe(0);
      expect(h.dataOffset).toBeGreaterThanOrEqual(h.headerSize);
      expect(h.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
      for (const [i, t] of h.tensors.entries()) {
        expect((t.offset - h.dataOffset) % a).toBe(0);
        expect(t.shape).toEqual(tensors[i].shape);
        expect(t.type).toBe(tensors[i].type);
        expect(t.size).toBe(tensors[i].data.length);
        expect(file.subarray(t.offset, t.offset + t.size)).toEqual(tensors[i].data);
      }
      // ggml pads every tensor, the last included
      expect(file.length).toBe(h.dataOffset + h.dataSize);
      expect(h.dataSize % a).toBe(0);
    });
  }

  it("re-writes what it read, byte for byte", () => {
    const file = writeGguf({ metadata, tensors });
    const h = parseGgufHeader(file);
    const again = writeGguf({
      metadata: [...h.metadata.values()].map((kv) => [kv.key, kv.value, kv.type] as MetadataEntry),
      tensors: h.tensors.map((t) => ({ ...t, data: file.subarray(t.offset, t.offset + t.size) })),
    });
    expect(again).toEqual(file);
  });

  it("places tensors by name", () => {
    expect(tensorPlacement("blk.12.ffn_down.weight")).toEqual({ layer: 12, role: "layer" });
    expect(tensorPlacement("token_embd.weight")).toEqual({ layer: null, role: "input" });
    expect(tensorPlacement("output_norm.weight")).toEqual({ layer: null, role: "output" });
    expect(tensorPlacement("output.weight")).toEqual({ layer: null, role: "output" });
    expect(tensorPlacement("rope_freqs.weight")).toEqual({ layer: null, role: "shared" });
  });

  it("refuses tensors and values llama.cpp would refuse", () => {
    const t = { name: "x", shape: [4], type: GgmlType.F32, data: new Uint8Array(16) };
    const w = (over: object, md: MetadataEntry[] = []) => () =>
      writeGguf({ metadata: md, tensors: [{ ...t, ...over }] });
    expect(w({ data: new Uint8Array(15) })).toThrow(/needs 16 bytes/);
    expect(w({ name: "n".repeat(64) })).toThrow(GgufError);
    expect(w({ shape: [1, 1, 1, 1, 4] })).toThrow(/invalid shape/);
    expect(w({ type: GgmlType.Q8_0, shape: [16], data: new Uint8Array(17) })).toThrow(/block size 32/);
    expect(w({ type: 4 })).toThrow(/unknown ggml type/);
    expect(() => writeGguf({ metadata: [], tensors: [t, t] })).toThrow(/duplicate tensor/);
    expect(w({}, [["k", 256, "u8"]])).toThrow(/not a valid u8/);
    expect(w({}, [["k", 1.5, "i32"]])).toThrow(/not a valid i32/);
    expect(w({}, [["k", "1", "u32"]])).toThrow(/not a valid u32/);
    expect(w({}, [["k", []]])).toThrow(/empty array/);
    expect(w({}, [["k", 1], ["k", 2]])).toThrow(/duplicate metadata key/);
    expect(() => writeGguf({ metadata: [], tensors: [], alignment: 48 })).toThrow(/power of two/);
  });
});

describe("prefix parsing", () => {
  const file = synthModel({ arch: "qwen3", nLayer: 2 });
  const full = parseGgufHeader(file, { fileSize: file.length });

  it("asks for more bytes, never more than the header needs, until it parses", () => {
    for (let len = 0; len < full.headerSize; len += 97) {
      try {
        parseGgufHeader(file.subarray(0, len));
        throw new Error(`parsed a ${len}-byte prefix of a ${full.headerSize}-byte header`);
      } catch (e) {
        expect(e).toBeInstanceOf(GgufNeedMoreBytes);
        const need = (e as GgufNeedMoreBytes).needed;
        expect(need).toBeGreaterThan(len);
        expect(need).toBeLessThanOrEqual(full.headerSize);
      }
    }
    expect(() => parseGgufHeader(file.subarray(0, full.headerSize - 1))).toThrow(GgufNeedMoreBytes);
    expect(parseGgufHeader(file.subarray(0, full.headerSize)).tensors).toEqual(full.tensors);
  });

  it("reaches the full header whether a caller fetches exactly what it is told or doubles", () => {
    const exact = parseByPrefixes(file, 16, (_, needed) => needed);
    expect(exact.header.tensors).toEqual(full.tensors);
    expect(exact.header.dataOffset).toBe(full.dataOffset);
    expect(Math.max(...exact.asked)).toBeLessThanOrEqual(full.headerSize);
    const doubling = parseByPrefixes(file, 1024, (have, needed) => Math.max(needed, 2 * have));
    expect(doubling.header.tensors).toEqual(full.tensors);
    expect(doubling.asked.length).toBeLessThanOrEqual(Math.ceil(Math.log2(full.headerSize / 1024)) + 1);
  });

  it("reads a header from a file's stream, growing past the first MiB, and closes the stream", async () => {
    const big = synthModel({ arch: "llama", nLayer: 1, nEmbd: 32, nHead: 2, nVocab: 60_000 });
    const header = parseGgufHeader(big, { fileSize: big.length });
    expect(header.headerSize).toBeGreaterThan(2 ** 20);
    let pulled = 0, cancelled = false;
    const file = {
      readable: new ReadableStream<Uint8Array>({
        pull(c) {
          c.enqueue(big.subarray(pulled, pulled + 65_536));
          pulled += 65_536;
        },
        cancel() {
          cancelled = true;
        },
      }, { highWaterMark: 0 }),
      stat: () => Promise.resolve({ size: big.length }),
    };
    expect((await readGgufHeader(file)).tensors).toEqual(header.tensors);
    expect(cancelled).toBe(true);
    expect(pulled).toBeLessThan(header.headerSize + 2 * 2 ** 20);
  });

  it("reports the end of a whole file as truncation, not as a wish for more bytes", () => {
    expectGgufError(file.subarray(0, 100), "truncated", /cannot fit in a 100-byte file/, 100);
    expectGgufError(file.subarray(0, 2000), "truncated", /past the end of the 2000-byte file/, 2000);
  });
});

describe("malformed GGUF", () => {
  // key "k" holding the string "v": the string's length field sits at byte 24+8+1+4 = 37
  const oneString = () => writeGguf({ metadata: [["k", "v"]], tensors: [] });
  const withU64At = (bytes: Uint8Array, at: number, v: bigint) => {
    const b = bytes.slice();
    new DataView(b.buffer).setBigUint64(at, v, true);
    return b;
  };
  const withU32At = (bytes: Uint8Array, at: number, v: number) => {
    const b = bytes.slice();
    new DataView(b.buffer).setUint32(at, v, true);
    return b;
  };

  it("rejects a bad magic, v1 and big-endian files", () => {
    expectGgufError(new TextEncoder().encode("GGML\x03\0\0\0"), "bad_magic", /not a GGUF file/);
    expectGgufError(new Uint8Array([0x46, 0x55, 0x47, 0x47, 0, 0, 0, 3]), "bad_magic", /big-endian/);
    expectGgufError(withU32At(oneString(), 4, 1), "unsupported_version", /version 1/);
    expectGgufError(withU32At(oneString(), 4, 4), "unsupported_version", /version 4/);
  });

  it("rejects a string length that runs past the file", () => {
    const file = withU64At(oneString(), 37, 1000n);
    expectGgufError(file, "truncated", /past the end/, file.length);
  });

  it("refuses absurd lengths and counts before allocating", () => {
    expectGgufError(withU64At(oneString(), 37, 1n << 40n), "too_large", /length is 1099511627776/);
    expectGgufError(withU64At(oneString(), 8, 1n << 40n), "too_large", /tensor count/);
    expectGgufError(withU64At(oneString(), 16, 1n << 62n), "too_large", /metadata count/);
    const arr = writeGguf({ metadata: [["k", [1], { array: "u32" }]], tensors: [] });
    expectGgufError(withU64At(arr, 24 + 8 + 1 + 4 + 4, 1n << 40n), "too_large", /item count/);
    // a plausible count that cannot fit in the file is truncation
    const counts = withU64At(oneString(), 16, 100_000n);
    expectGgufError(counts, "truncated", /cannot fit/, counts.length);
  });

  it("rejects unknown value and tensor types", () => {
    expectGgufError(withU32At(oneString(), 24 + 8 + 1, 13), "bad_type", /unknown value type 13/);
    const t = writeGguf({
      metadata: [],
      tensors: [{ name: "x", shape: [4], type: GgmlType.F32, data: new Uint8Array(16) }],
    });
    // tensor info: name len(8) "x"(1) n_dims(4) ne0(8) type(4) at 24+8+1+4+8
    expectGgufError(withU32At(t, 45, 5), "bad_type", /unknown ggml type 5/);
    expectGgufError(withU32At(t, 45, GgmlType.Q4_0), "bad_tensor", /not a multiple of its block size 32/);
    expectGgufError(withU32At(t, 33, 5), "bad_tensor", /5 dimensions/);
    expectGgufError(withU64At(t, 49, 32n), "bad_tensor", /starts at data offset 32; ggml expects 0/);
  });

  it("rejects duplicate keys and a bad alignment", () => {
    const dup = writeGguf({ metadata: [["a", 1, "u8"], ["b", 2, "u8"]], tensors: [] });
    dup[24 + 8] = "a".charCodeAt(0);
    dup[24 + 8 + 1 + 4 + 1 + 8] = "a".charCodeAt(0);
    expectGgufError(dup, "bad_value", /duplicate metadata key 'a'/);
    const al = writeGguf({ metadata: [["general.alignment", 64, "u32"]], tensors: [] });
    expectGgufError(withU32At(al, 24 + 8 + 17 + 4, 48), "bad_value", /not a power of two/);
  });
});

describe("manifest", () => {
  const nLayer = 4;

  it("counts bytes per layer and for input and output", async () => {
    const file = layeredModel(nLayer, false);
    const m = buildManifest(parseGgufHeader(file), file.length, SHA);
    expect(m.artifact).toBe(SHA);
    expect(m.arch).toBe("llama");
    expect(m.nLayer).toBe(nLayer);
    expect(m.layers).toEqual([32, 36, 40, 44]);
    expect(m.inputBytes).toBe(64);
    expect(m.outputBytes).toBe(16 + 64);
    expect(m.tiedEmbeddings).toBe(false);
    expect(m.tensors.find((t) => t.name === "blk.2.attn_norm.weight")).toMatchObject({
      layer: 2,
      typeName: "f32",
    });
    expect(formatManifest(m)).toMatch(/blk\.3\.attn_norm\.weight\s+layer\s+f32\s+\[11\]/);
    expect(await sha256Hex(new Uint8Array())).toBe(
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    );
  });

  it("gives the first shard the input, the last the output, a middle one only its layers", () => {
    const file = layeredModel(nLayer, false);
    const m = buildManifest(parseGgufHeader(file), file.length, SHA);
    const names = (s: number, e: number) => shardBytes(m, s, e).tensors.map((t) => t.name);
    expect(names(0, 1)).toEqual(["token_embd.weight", "blk.0.attn_norm.weight"]);
    expect(names(1, 3)).toEqual(["blk.1.attn_norm.weight", "blk.2.attn_norm.weight"]);
    expect(names(3, 4)).toEqual(["blk.3.attn_norm.weight", "output_norm.weight", "output.weight"]);
    expect(shardBytes(m, 0, 1).bytes).toBe(64 + 32);
    expect(shardBytes(m, 1, 3).bytes).toBe(36 + 40);
    expect(shardBytes(m, 3, 4).bytes).toBe(44 + 16 + 64);
    // a route covers each tensor once
    const total = m.tensors.reduce((s, t) => s + t.size, 0);
    expect(shardBytes(m, 0, 2).bytes + shardBytes(m, 2, 4).bytes).toBe(total);
    expect(shardBytes(m, 0, nLayer).bytes).toBe(total);
    // spans cover exactly the tensors' bytes, merged across alignment padding
    const s = shardBytes(m, 1, 3);
    expect(s.spans).toHaveLength(1);
    expect(s.spans[0][0]).toBe(s.tensors[0].offset);
    expect(s.spans[0][1]).toBe(s.tensors[1].offset + s.tensors[1].size);
  });

  it("gives the last shard the token embedding when the head is tied", () => {
    const file = layeredModel(nLayer, true);
    const m = buildManifest(parseGgufHeader(file), file.length, SHA);
    expect(m.tiedEmbeddings).toBe(true);
    const last = shardBytes(m, 2, 4);
    expect(last.tensors.map((t) => t.name)).toEqual([
      "token_embd.weight",
      "blk.2.attn_norm.weight",
      "blk.3.attn_norm.weight",
      "output_norm.weight",
    ]);
    expect(last.bytes).toBe(64 + 40 + 44 + 16);
    expect(shardBytes(m, 1, 2).tensors.map((t) => t.name)).toEqual(["blk.1.attn_norm.weight"]);
    expect(shardBytes(m, 0, 4).tensors.filter((t) => t.name === "token_embd.weight")).toHaveLength(1);
  });

  it("rejects ranges outside the model and files shorter than their tensors", () => {
    const file = layeredModel(nLayer, false);
    const m = buildManifest(parseGgufHeader(file), file.length, SHA);
    expect(() => shardBytes(m, 2, 2)).toThrow(RangeError);
    expect(() => shardBytes(m, 0, 5)).toThrow(RangeError);
    expect(() => shardBytes(m, -1, 2)).toThrow(RangeError);
    expect(() => buildManifest(parseGgufHeader(file), file.length - 100, SHA)).toThrow(/past the/);
    expect(() => buildManifest(parseGgufHeader(file), file.length, "xyz")).toThrow(/sha256/);
  });
});

describe("synthetic models", () => {
  it("are deterministic per seed", async () => {
    const a = synthModel({ arch: "llama", seed: 7 });
    const b = synthModel({ arch: "llama", seed: 7 });
    const c = synthModel({ arch: "llama", seed: 8 });
    expect(await sha256Hex(a)).toBe(await sha256Hex(b));
    expect(a.length).toBe(c.length);
    expect(await sha256Hex(a)).not.toBe(await sha256Hex(c));
  });

  it("share weights between tied and untied variants of one seed", () => {
    const untied = synthModel({ arch: "llama" });
    const tied = synthModel({ arch: "llama", tiedEmbeddings: true });
    const hu = parseGgufHeader(untied), ht = parseGgufHeader(tied);
    expect(hu.tensors.some((t) => t.name === "output.weight")).toBe(true);
    expect(ht.tensors.some((t) => t.name === "output.weight")).toBe(false);
    const data = (file: Uint8Array, h: typeof hu, name: string) => {
      const t = h.tensors.find((x) => x.name === name)!;
      return file.subarray(t.offset, t.offset + t.size);
    };
    for (const name of ["token_embd.weight", "blk.3.ffn_down.weight"]) {
      const a = data(tied, ht, name), b = data(untied, hu, name);
      expect(a.length).toBe(b.length);
      expect(a.every((x, i) => x === b[i])).toBe(true);
    }
  });

  for (
    const a of SYNTH_ARCHS.filter((a) =>
      !["deepseek2", "glm4moe", "glm-dsa", "deepseek32", "deepseek4"].includes(a)
    )
  ) {
    it(`writes a complete ${a} model`, () => {
      const file = synthModel({ arch: a });
      const h = parseGgufHeader(file, { fileSize: file.length });
      expect(arch(h)).toBe(a);
      expect(blockCount(h)).toBe(6);
      expect(metaNumber(h, `${a}.embedding_length`)).toBe(64);
      expect(metaString(h, "tokenizer.ggml.model")).toBe("gpt2");
      const tokens = h.metadata.get("tokenizer.ggml.tokens")!.value as GgufArray;
      expect(tokens.items).toHaveLength(384);
      expect(new Set(tokens.items).size).toBe(384);
      const perLayer =
        ({ llama: 9, qwen2: 12, qwen3: 11, qwen3moe: 12, gemma3: 13 } as Record<string, number>)[a];
      expect(h.tensors).toHaveLength(1 + 6 * perLayer + 2);
      expect(h.tensors.filter((t) => t.layer === 5)).toHaveLength(perLayer);
      for (const t of h.tensors) {
        const v = new Float32Array(file.slice(t.offset, t.offset + t.size).buffer);
        expect(v.every(Number.isFinite)).toBe(true);
      }
    });
  }

  it("writes qwen3moe experts as 3-d tensors with the expert count last", () => {
    const h = parseGgufHeader(synthModel({ arch: "qwen3moe", nExpert: 8, nExpertUsed: 2, nFfExp: 32 }));
    expect(metaNumber(h, "qwen3moe.expert_count")).toBe(8);
    expect(metaNumber(h, "qwen3moe.expert_used_count")).toBe(2);
    expect(h.tensors.find((t) => t.name === "blk.0.ffn_down_exps.weight")!.shape).toEqual([32, 64, 8]);
    expect(h.tensors.find((t) => t.name === "blk.0.ffn_gate_inp.weight")!.shape).toEqual([64, 8]);
  });

  it("quantizes to f16 and q8_0 with ggml's sizes", () => {
    for (const [weightType, type] of [["f16", GgmlType.F16], ["q8_0", GgmlType.Q8_0]] as const) {
      const h = parseGgufHeader(synthModel({ arch: "llama", weightType }));
      const q = h.tensors.find((t) => t.name === "blk.0.ffn_up.weight")!;
      expect(q.type).toBe(type);
      expect(q.size).toBe(tensorBytes([64, 128], type));
      expect(h.tensors.find((t) => t.name === "blk.0.attn_norm.weight")!.type).toBe(GgmlType.F32);
    }
  });

  it("writes only a header for an architecture it has no weights for", () => {
    const h = parseGgufHeader(synthModel({ arch: "gemma" }));
    expect(arch(h)).toBe("gemma");
    expect(blockCount(h)).toBe(6);
    expect(h.tensors).toHaveLength(0);
  });

  it("writes DeepSeek-V2 and GLM-4.5 MoE models with every structural feature", () => {
    for (const a of ["deepseek2", "glm4moe"]) {
      const file = synthModel({ arch: a });
      const h = parseGgufHeader(file, { fileSize: file.length });
      // 6 trunk layers and an MTP layer after them
      expect(blockCount(h)).toBe(7);
      expect(metaNumber(h, `${a}.nextn_predict_layers`)).toBe(1);
      const names = new Set(h.tensors.map((t) => t.name));
      // a leading dense layer, then routed experts with a selection bias and a shared expert
      expect(names.has("blk.0.ffn_gate.weight") && !names.has("blk.0.ffn_gate_exps.weight")).toBe(true);
      for (const t of ["ffn_gate_exps", "ffn_down_exps", "ffn_gate_shexp", "ffn_down_shexp"]) {
        expect(names.has(`blk.1.${t}.weight`), t).toBe(true);
      }
      expect(names.has("blk.1.exp_probs_b.bias")).toBe(true);
      expect(names.has("blk.6.nextn.eh_proj.weight") && names.has("blk.6.ffn_gate_inp.weight")).toBe(true);
      expect(names.has("blk.5.nextn.eh_proj.weight")).toBe(false);
    }
    // latent attention: compressed q and kv, per-head k_b and v_b, a K-only cache of kv_lora + rope
    const ds = parseGgufHeader(synthModel({ arch: "deepseek2" }));
    const shape = (n: string) => ds.tensors.find((t) => t.name === n)!.shape;
    expect(shape("blk.0.attn_kv_a_mqa.weight")).toEqual([64, 48]);
    expect(shape("blk.0.attn_k_b.weight")).toEqual([16, 32, 4]);
    expect(shape("blk.0.attn_v_b.weight")).toEqual([32, 16, 4]);
    expect(metaNumber(ds, "deepseek2.attention.key_length")).toBe(48);
    expect(metaNumber(ds, "deepseek2.attention.head_count_kv")).toBe(1);
    // GLM: biased q, k, v
    const glm = parseGgufHeader(synthModel({ arch: "glm4moe" }));
    expect(glm.tensors.some((t) => t.name === "blk.0.attn_q.bias")).toBe(true);
  });

  it("writes a DeepSeek-V4 model with every structural feature", () => {
    const file = synthModel({ arch: "deepseek4" });
    const h = parseGgufHeader(file, { fileSize: file.length });
    const a = "deepseek4";
    expect(blockCount(h)).toBe(7);
    expect(metaNumber(h, `${a}.nextn_predict_layers`)).toBe(1);
    expect(metaNumber(h, `${a}.hyper_connection.count`)).toBe(4);
    expect(metaNumber(h, `${a}.expert_gating_func`)).toBe(4);
    const ratios = (h.metadata.get(`${a}.attention.compress_ratios`)!.value as GgufArray).items.map(Number);
    expect(ratios).toEqual([4, 128, 0, 4, 128, 0, 0]);
    const t = (n: string) => h.tensors.find((x) => x.name === n);
    // the residual's 4 streams mix through hyper-connections: (2 + 4) × 4 weights from 4 × n_embd
    expect(t("blk.0.hc_attn_fn.weight")!.shape).toEqual([256, 24]);
    expect(t("output_hc_fn.weight")!.shape).toEqual([256, 4]);
    // compressors: every 4 tokens (overlapping: twice the width) with an indexer, every 128
    expect(t("blk.0.attn_compressor_kv.weight")!.shape).toEqual([64, 32]);
    expect(t("blk.0.indexer_compressor_ape.weight")!.shape).toEqual([128, 4]);
    expect(t("blk.1.attn_compressor_ape.weight")!.shape).toEqual([16, 128]);
    expect(t("blk.1.indexer.proj.weight")).toBeUndefined();
    expect(t("blk.2.attn_compressor_kv.weight")).toBeUndefined();
    // layers 0 and 1 route by token id: an i32 table of 2 distinct experts per token
    const table = t("blk.1.ffn_gate_tid2eid.weight")!;
    expect(table.type).toBe(GgmlType.I32);
    expect(table.shape).toEqual([2, 384]);
    const ids = new Int32Array(file.slice(table.offset, table.offset + table.size).buffer);
    for (let tok = 0; tok < 384; tok++) {
      expect(ids[2 * tok]).not.toBe(ids[2 * tok + 1]);
      expect(Math.max(ids[2 * tok], ids[2 * tok + 1])).toBeLessThan(4);
    }
    expect(t("blk.1.exp_probs_b.bias")).toBeUndefined();
    expect(t("blk.2.exp_probs_b.bias")!.shape).toEqual([4]);
    // the MTP layer, and a shared expert everywhere
    expect(t("blk.6.nextn.eh_proj.weight")!.shape).toEqual([128, 64]);
    expect(t("blk.6.ffn_down_shexp.weight")).toBeDefined();
  });

  it("rejects impossible shapes", () => {
    expect(() => synthModel({ arch: "llama", nHead: 3, nHeadKv: 2 })).toThrow(RangeError);
    expect(() => synthModel({ arch: "qwen2", headDim: 32 })).toThrow(/qwen2/);
    expect(() => synthModel({ arch: "llama", nVocab: 100 })).toThrow(/nVocab/);
    expect(() => synthModel({ arch: "llama", weightType: "q8_0", nEmbd: 48, nHead: 4, nHeadKv: 2 })).toThrow(
      /q8_0/,
    );
  });
});
