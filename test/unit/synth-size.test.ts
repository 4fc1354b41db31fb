// Synthetic models of a given size: the shape chosen for a size, the streamed writer (the same
// bytes as the in-memory one), seekable weight streams and the Q4_0 encoding.
import { describe, expect, it } from "vitest";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { GgmlType, tensorBytes } from "../../src/gguf/types.ts";
import { toQ4_0 } from "../../src/gguf/encode.ts";
import { gaussian, GaussianStream } from "../../src/model/seeded.ts";
import {
  renderPiece,
  synthChunks,
  synthFile,
  synthModel,
  type SynthOptions,
  synthSize,
} from "../../src/model/synth.ts";
import { parseMemorySize } from "../../src/engine/memory-cap.ts";
import { SIZE_TOLERANCE, synthModelForSize } from "../../src/model/synth-size.ts";

/** The chunks joined, each copied as it comes (with reuse, a chunk lives until the next). */
const concat = (parts: Iterable<Uint8Array>): Uint8Array => {
  const list: Uint8Array[] = [];
  for (const p of parts) list.push(p.slice());
  const out = new Uint8Array(list.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of list) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};
const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

describe("sizes", () => {
  it("read as --size writes them: MB/GB decimal, MiB/GiB and a bare M/G binary", () => {
    expect(parseMemorySize("500MB")).toBe(500e6);
    expect(parseMemorySize("1GB")).toBe(1e9);
    expect(parseMemorySize("1.5GiB")).toBe(1.5 * 2 ** 30);
    expect(parseMemorySize("6G")).toBe(6 * 2 ** 30);
    expect(parseMemorySize("60M")).toBe(60 * 2 ** 20);
    expect(parseMemorySize("4096")).toBe(4096);
    expect(() => parseMemorySize("6 apples")).toThrow(RangeError);
    expect(() => parseMemorySize("0MB")).toThrow(RangeError);
  });
});

describe("a synthetic model for a size", () => {
  const sizes = [3e6, 10e6, 30e6, 60e6, 150e6, 400e6, 1e9, 1.5 * 2 ** 30, 3e9, 6e9, 9e9, 16e9];
  const chosen = sizes.map((s) => synthModelForSize("llama", s));

  it("lands within the tolerance of the size, and its reported size is the file's", () => {
    chosen.forEach((m, i) => {
      expect(Math.abs(m.fileBytes / sizes[i] - 1)).toBeLessThan(SIZE_TOLERANCE);
      expect(synthSize(m.options)).toEqual({ fileBytes: m.fileBytes, parameters: m.parameters });
    });
  });

  it("grows with the size: parameters, width and (within one family) depth", () => {
    for (let i = 1; i < chosen.length; i++) {
      const [a, b] = [chosen[i - 1], chosen[i]];
      expect(b.parameters).toBeGreaterThan(a.parameters);
      expect(b.options.nEmbd).toBeGreaterThanOrEqual(a.options.nEmbd);
      if (b.like === a.like) expect(b.options.nLayer).toBeGreaterThanOrEqual(a.options.nLayer);
    }
  });

  it("looks like a real model that size", () => {
    const at = (s: number) => chosen[sizes.indexOf(s)];
    // ~1 GB in q8_0: a TinyLlama-like 1B, grouped-query attention
    const gb = at(1e9).options;
    expect(gb).toMatchObject({ nEmbd: 2048, nHead: 32, nHeadKv: 4, weightType: "q8_0" });
    expect(gb.nLayer).toBeGreaterThanOrEqual(16);
    expect(gb.nLayer).toBeLessThanOrEqual(24);
    expect(gb.nFf).toBeGreaterThanOrEqual(4096);
    expect(at(1e9).parameters).toBeGreaterThan(0.8e9);
    // ~6 GB: a 7B-wide model
    expect(at(6e9).options.nEmbd).toBe(4096);
    expect(at(6e9).options.nLayer).toBeGreaterThanOrEqual(24);
    expect(at(6e9).parameters).toBeGreaterThan(5e9);
    // small sizes: small models, still many-layered enough to be a transformer
    expect(at(60e6).options.nEmbd).toBeLessThanOrEqual(576);
    expect(at(60e6).options.nLayer).toBeGreaterThanOrEqual(4);
    for (const m of chosen) {
      const o = m.options;
      expect(o.nEmbd % o.nHead).toBe(0);
      expect(o.nHead % o.nHeadKv).toBe(0);
      expect(o.nFf % 32).toBe(0);
      expect(o.nVocab).toBeGreaterThanOrEqual(512);
      // weights one draw each; an untied head with the successor term
      expect(o.draws).toBe(1);
      expect(o.tiedEmbeddings).toBe(false);
      expect(o.successor).toBeGreaterThan(0);
    }
  });

  it("keeps what the caller fixes", () => {
    const m = synthModelForSize("llama", 1e9, { nLayer: 12, weightType: "q4_0", seed: 9 });
    expect(m.options).toMatchObject({ nLayer: 12, weightType: "q4_0", seed: 9 });
    expect(Math.abs(m.fileBytes / 1e9 - 1)).toBeLessThan(SIZE_TOLERANCE);
    const w = synthModelForSize("llama", 200e6, { nEmbd: 1024, nHead: 16, nHeadKv: 4, nVocab: 32000 });
    expect(w.options).toMatchObject({ nEmbd: 1024, nHead: 16, nHeadKv: 4, nVocab: 32000 });
    expect(Math.abs(w.fileBytes / 200e6 - 1)).toBeLessThan(SIZE_TOLERANCE);
    expect(synthModelForSize("llama", 1e9, { tiedEmbeddings: true }).options.successor ?? 0).toBe(0);
  });

  it("refuses what it cannot shape", () => {
    expect(() => synthModelForSize("qwen3moe", 1e9)).toThrow(/--size/);
    // 40 fixed layers of a 2048-wide model cannot fit 100 MB
    expect(() => synthModelForSize("llama", 100e6, { nLayer: 40, nEmbd: 2048 })).toThrow(RangeError);
  });
});

describe("the streamed writer", () => {
  const cases: SynthOptions[] = [
    { arch: "llama" },
    { arch: "llama", weightType: "q8_0", nEmbd: 128, nFf: 256, tiedEmbeddings: true },
    { arch: "qwen2", weightType: "f16", seed: 3 },
    { arch: "qwen3moe", weightType: "q8_0", nEmbd: 128, nFf: 256 },
    { arch: "gemma" },
    // what --size writes: one draw a weight, a successor head, q4_0
    { arch: "llama", weightType: "q4_0", nEmbd: 96, nHead: 3, nHeadKv: 1, nFf: 192, nVocab: 700, draws: 1 },
    {
      arch: "llama",
      weightType: "q8_0",
      nEmbd: 128,
      nFf: 256,
      nVocab: 1000,
      draws: 1,
      embdStd: 1.2,
      successor: 16,
    },
  ];

  for (const o of cases) {
    it(`writes the bytes synthModel builds (${JSON.stringify(o)})`, () => {
      const whole = synthModel(o);
      // pieces that split rows, and pieces as the CLI writes them (reused buffers)
      for (const [pieceValues, reuse] of [[96, false], [1 << 20, true]] as const) {
        const file = synthFile(o, pieceValues);
        expect(file.fileBytes).toBe(whole.length);
        expect(synthSize(o).fileBytes).toBe(whole.length);
        expect(same(concat(synthChunks(file, { reuse })), whole)).toBe(true);
      }
    });
  }

  it("writes a header that reads back with the shape and types asked for", () => {
    const o: SynthOptions = {
      arch: "llama",
      weightType: "q4_0",
      nLayer: 3,
      nEmbd: 128,
      nHead: 4,
      nHeadKv: 2,
      nFf: 384,
      nVocab: 600,
      draws: 1,
      successor: 16,
    };
    const file = synthFile(o);
    const h = parseGgufHeader(file.header, { fileSize: file.fileBytes });
    const up = h.tensors.find((t) => t.name === "blk.2.ffn_up.weight")!;
    expect(up.type).toBe(GgmlType.Q4_0);
    expect(up.size).toBe(tensorBytes([128, 384], GgmlType.Q4_0));
    expect(h.tensors.find((t) => t.name === "output.weight")!.shape).toEqual([128, 600]);
    expect(h.tensors.find((t) => t.name === "blk.0.attn_k.weight")!.shape).toEqual([128, 64]);
    expect(h.tensors.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0)).toBe(file.parameters);
  });

  it("is deterministic per seed", () => {
    const o: SynthOptions = {
      arch: "llama",
      weightType: "q8_0",
      nEmbd: 128,
      nFf: 256,
      draws: 1,
      successor: 16,
    };
    const a = synthModel({ ...o, seed: 5 }),
      b = synthModel({ ...o, seed: 5 }),
      c = synthModel({ ...o, seed: 6 });
    expect(same(a, b)).toBe(true);
    expect(same(a, c)).toBe(false);
  });

  it("adds each output row's successor embedding", () => {
    const o = { arch: "llama", nEmbd: 64, nVocab: 400, draws: 1 as const, embdStd: 1, successor: 16 };
    const file = synthFile(o);
    const head = file.pieces.find((p) => typeof p !== "number" && p.name === "output.weight");
    if (!head || typeof head === "number") throw new Error("no output.weight");
    const values = new Float32Array(renderPiece({ ...head, from: 0, to: head.values }).buffer);
    const plain = new Float32Array(400 * 64);
    new GaussianStream(1, "output.weight", 1).fill(plain, head.std, 0);
    const embd = new GaussianStream(1, "token_embd.weight", 1);
    // rows of specials are plain; row t holds plain + gain × row (t - shift) of the embedding's draws
    expect(values.subarray(0, 3 * 64)).toEqual(plain.subarray(0, 3 * 64));
    const shift = head.plus!.shift, row = new Float32Array(64);
    for (const t of [3, 200, 399]) {
      embd.seek((((t - shift) % 400) + 400) % 400 * 64);
      embd.fill(row, head.plus!.std, 0);
      for (let i = 0; i < 64; i++) {
        expect(values[t * 64 + i]).toBe(Math.fround(plain[t * 64 + i] + row[i]));
      }
    }
  });
});

describe("weight streams", () => {
  for (const draws of [1, 4] as const) {
    it(`seek to any value (${draws} draw${draws > 1 ? "s" : ""} a value)`, () => {
      const all = new Float32Array(5000);
      new GaussianStream(7, "w", draws).fill(all, 0.5, 0.1);
      const s = new GaussianStream(7, "w", draws);
      const part = new Float32Array(100);
      s.seek(4321);
      s.fill(part, 0.5, 0.1);
      expect(part).toEqual(all.subarray(4321, 4421));
      // near-normal: mean, spread and a bounded tail
      const big = new Float32Array(200_000);
      new GaussianStream(1, "big", draws).fill(big, 1, 0);
      const mean = big.reduce((a, x) => a + x, 0) / big.length;
      const sd = Math.sqrt(big.reduce((a, x) => a + (x - mean) ** 2, 0) / big.length);
      expect(Math.abs(mean)).toBeLessThan(0.01);
      expect(Math.abs(sd - 1)).toBeLessThan(0.01);
      expect(big.every((x) => Math.abs(x) <= 3.47)).toBe(true);
    });
  }

  it("seek past 2^32 values stays on the counter", () => {
    const s = new GaussianStream(3, "far", 1), t = new GaussianStream(3, "far", 1);
    const a = new Float32Array(4), b = new Float32Array(4);
    s.seek(2 ** 32 + 10); // the state wraps every 2^32 draws
    s.fill(a, 1, 0);
    t.seek(10);
    t.fill(b, 1, 0);
    expect(a).toEqual(b);
  });
});

describe("q4_0", () => {
  it("encodes blocks of 32 in 18 bytes that decode to within a step (half a step unclipped)", () => {
    const v = gaussian(2, "q4", 32 * 64, 1, 0);
    const q = toQ4_0(v);
    expect(q.length).toBe(64 * 18);
    const view = new DataView(q.buffer);
    for (let b = 0; b < 64; b++) {
      const d = halfToFloat(view.getUint16(b * 18, true));
      for (let j = 0; j < 32; j++) {
        const byte = q[b * 18 + 2 + (j % 16)];
        const nib = j < 16 ? byte & 15 : byte >> 4;
        // the largest magnitude maps to -8 steps; its opposite clips at +7
        const tolerance = nib === 15 ? Math.abs(d) : Math.abs(d) * 0.5;
        expect(Math.abs((nib - 8) * d - v[b * 32 + j])).toBeLessThanOrEqual(tolerance + 0.01);
      }
    }
  });
});

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}
