import { describe, expect, it } from "vitest";
import { EngineError } from "../../src/engine/errors.ts";
import { layerRange } from "../../src/engine/layer-range.ts";
import {
  checkMemoryCap,
  computeBytes,
  defaultPool,
  type EngineBudget,
  headerModel,
  kvCellsAllocated,
  kvStreams,
  manifestModel,
  memoryMisfit,
  parseMemorySize,
  rangeMemory,
  specMemory,
} from "../../src/engine/memory-cap.ts";
import { WASM32_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";
import type { GraphShape } from "../../src/gguf/graph-shape.ts";
import { uniformKv } from "../../src/gguf/kv-shape.ts";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { synthModel } from "../../src/model/synth.ts";

const MIB = 2 ** 20, GIB = 2 ** 30;

describe("whether a range fits an engine's memory", () => {
  it("counts weights and a full f16 KV pool", () => {
    // SmolLM2-135M: 30 layers, n_embd_kv 192; 8192 cells
    const m = rangeMemory({ weightBytes: 100e6, kv: uniformKv(30, 192), kvCells: 8192 });
    expect(m.kvBytes).toBe(2 * 30 * 8192 * 192 * 2);
    expect(m.total).toBe(100e6 + m.kvBytes);
    expect(memoryMisfit(m, WASM32_MEMORY_CAP)).toBeUndefined();
    expect(memoryMisfit(m, 0)).toBeUndefined(); // no cap of its own
  });

  it("refuses a range past wasm32's 4 GiB and says by how much", () => {
    // a 7B model's 16 layers at ~0.25 GiB each, 32K cells of n_embd_kv 1024
    const m = rangeMemory({ weightBytes: 16 * 2 ** 28, kv: uniformKv(16, 1024), kvCells: 32768 });
    expect(memoryMisfit(m, WASM32_MEMORY_CAP)).toMatch(
      /need 6\.00 GiB \(weights 4\.00 GiB \+ KV 2\.00 GiB \+ compute 0\.00 GiB\), more than the memory cap of 4\.00 GiB/,
    );
  });
});

describe("memory sizes", () => {
  it("reads decimal MB/GB, binary MiB/GiB, and bare M/G as binary", () => {
    expect(parseMemorySize("512MB")).toBe(512e6);
    expect(parseMemorySize("1.5GiB")).toBe(1.5 * GIB);
    expect(parseMemorySize("2G")).toBe(2 * GIB);
    expect(parseMemorySize("2GB")).toBe(2e9);
    expect(parseMemorySize("100M")).toBe(100 * MIB);
    expect(parseMemorySize("640KiB")).toBe(640 * 1024);
    expect(parseMemorySize("1 tb")).toBe(1e12);
    expect(parseMemorySize("4096")).toBe(4096);
  });

  it("refuses what is not a size", () => {
    for (const bad of ["", "G", "2XB", "-1G", "0", "1.5.2G", "two GB"]) {
      expect(() => parseMemorySize(bad), bad).toThrow(RangeError);
    }
    expect(() => parseMemorySize("2XB")).toThrow(`"2XB" is not a memory size (e.g. 512MB, 1.5GiB, 2G)`);
  });
});

// SmolLM2-135M, as its header says
const smol: GraphShape = { nEmbd: 576, nEmbdQ: 576, nEmbdKv2: 384, nFf: 1536, nVocab: 49152, nHead: 9 };
const node: EngineBudget = {
  kvCells: 8192,
  maxSequences: 16,
  batchTokens: 512,
  batchInvariant: true,
  flashAttention: true,
};

describe("the compute estimate", () => {
  // what llama.cpp (native CPU, and WASM alike) reported: the scheduler's compute buffer plus
  // the outputs buffer at its largest (docs/engine.md, "Memory caps"); `invariant` rows were
  // taken with a KV stream per sequence, the others with one pool (as an ordered pool is)
  const reported = [
    { range: [0, 30], batch: 512, invariant: true, mib: 98.25 + 3 },
    { range: [0, 30], batch: 64, invariant: true, mib: 12.28 + 3 },
    { range: [0, 30], batch: 256, invariant: true, sequences: 8, mib: 49.13 + 1.5 },
    { range: [0, 12], batch: 512, invariant: true, mib: 14.01 + 1.125 },
    { range: [0, 12], batch: 512, invariant: false, mib: 21.51 + 1.125 },
    { range: [0, 12], batch: 64, invariant: true, mib: 1.75 + 0.14 },
    { range: [5, 20], batch: 512, invariant: true, mib: 12.89 + 1.125 },
    { range: [5, 20], batch: 512, invariant: false, mib: 20.39 + 1.125 },
    { range: [12, 30], batch: 512, invariant: true, mib: 97.12 + 3 },
    { range: [12, 30], batch: 64, invariant: true, mib: 12.14 + 3 },
  ];

  it("bounds what llama.cpp allocates for SmolLM2, within a third", () => {
    for (const r of reported) {
      const at = { first: r.range[0] === 0, last: r.range[1] === 30 };
      const b = {
        ...node,
        batchTokens: r.batch,
        batchInvariant: r.invariant,
        maxSequences: r.sequences ?? 16,
      };
      const est = computeBytes(smol, at, b, r.invariant ? b.maxSequences : 1) / MIB;
      expect(est, JSON.stringify(r)).toBeGreaterThanOrEqual(r.mib);
      expect(est, JSON.stringify(r)).toBeLessThan(1.35 * r.mib + 0.5);
    }
  });

  it("grows with the batch, holds the head only on the last range, and the scores without fused attention", () => {
    const middle = { first: false, last: false };
    const c = (at: { first: boolean; last: boolean }, b: Partial<EngineBudget> = {}, streams = 16) =>
      computeBytes(smol, at, { ...node, ...b }, streams);
    expect(c(middle, { batchTokens: 256 })).toBeLessThan(c(middle));
    // the logits of 512 tokens (96 MiB) dwarf a layer's activations
    expect(c({ first: false, last: true }) - c(middle)).toBeGreaterThan(80 * MIB);
    // the first range also holds the token embeddings of the batch
    expect(c({ first: true, last: false }) - c(middle)).toBe(4 * 512 * 576);
    // unfused: every head's scores over the stream's 512 cells, f32
    expect(c(middle, { flashAttention: false }) - c(middle)).toBe(4 * 512 * 512 * 10 - 2 * 512 * 512);
    // one pool (shared, or ordered): each token sees all 8192 cells
    expect(c(middle, {}, 1) - c(middle)).toBe(2 * 512 * (8192 - 512));
  });

  it("counts the KV cells llama.cpp allocates: streams of whole 256s", () => {
    expect(kvCellsAllocated(8192, 16)).toBe(8192);
    expect(kvCellsAllocated(1024, 16)).toBe(4096); // 64 cells a stream round up to 256
    expect(kvCellsAllocated(1000)).toBe(1024);
    // llama.cpp allocated 36 MiB of KV for 0:12 with 1024 cells for 16 sequences
    expect(rangeMemory({ weightBytes: 0, kv: uniformKv(12, 192), kvCells: 1024, streams: 16 }).kvBytes)
      .toBe(36 * MIB);
  });
});

/** The synthetic model docs/engine.md measures: 8 layers, 512 wide, 8 heads, 4096 tokens. */
const MEASURED_SHAPE = { nLayer: 8, nEmbd: 512, nHead: 8, nHeadKv: 8, nFf: 1536, nVocab: 4096 } as const;

describe("a range's memory from the model's header", () => {
  const opts = {
    ...MEASURED_SHAPE,
    weightType: "q8_0" as const,
    draws: 1 as const,
  };
  const llama = synthModel({ arch: "llama", ...opts });
  const model = headerModel(parseGgufHeader(llama), llama.length);
  const spec = {
    range: layerRange(0, 8, 8),
    kvCells: 8192,
    maxSequences: 16,
    batchTokens: 512,
    batchInvariant: true,
  };

  it("reads the widths from the tensors and the head count from the metadata", () => {
    expect(model.graph).toEqual({
      nEmbd: 512,
      nEmbdQ: 512,
      nEmbdKv2: 1024,
      nFf: 1536,
      nVocab: 4096,
      nHead: 8,
    });
    expect(model.kv[0]).toEqual({ k: 512, v: 512, window: 0 });
    // from a manifest alone (an artifact before its download): the same widths
    expect(manifestModel(model.manifest).graph).toMatchObject({ nEmbd: 512, nFf: 1536, nVocab: 4096 });
    expect(manifestModel(model.manifest).kv).toEqual(model.kv);
    // a manifest from before the layout was recorded: K's width from its shape
    expect(manifestModel({ ...model.manifest, kv: undefined }).kv).toEqual(model.kv);
  });

  it("counts an MoE layer's used experts and its router", () => {
    const moe = synthModel({ arch: "qwen3moe", ...opts });
    const g = headerModel(parseGgufHeader(moe), moe.length).graph!;
    // 2 of 4 experts of 64, and a logit per expert
    expect(g.nFf).toBe(2 * 64 + 4);
  });

  it("is weights + KV + compute, the compute within a third of llama.cpp's 21.01 + 0.25 MiB (one ordered pool)", () => {
    const m = specMemory(model, spec, true);
    expect(m.total).toBe(m.weightBytes + m.kvBytes + m.computeBytes);
    expect(m.kvBytes).toBe(128 * MIB); // as llama.cpp allocated
    expect(m.computeBytes / MIB).toBeGreaterThanOrEqual(21.01 + 0.25);
    expect(m.computeBytes / MIB).toBeLessThan(1.35 * (21.01 + 0.25));
  });

  it("refuses past the cap, naming weights, KV, compute and the cap", () => {
    const need = specMemory(model, spec, true);
    let err: unknown;
    try {
      checkMemoryCap(model, spec, { capBytes: 100 * MIB, flashAttention: true });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(EngineError);
    expect((err as EngineError).code).toBe("over_memory_cap");
    const mib = (n: number) => (n / MIB).toFixed(1);
    expect((err as EngineError).message).toBe(
      `layers 0:8 need ${mib(need.total)} MiB (weights ${mib(need.weightBytes)} MiB + ` +
        `KV ${mib(need.kvBytes)} MiB + compute ${
          mib(need.computeBytes)
        } MiB), more than the memory cap of 100.0 MiB`,
    );
    // under a cap that holds it, or none
    expect(checkMemoryCap(model, spec, { capBytes: GIB, flashAttention: true })).toEqual(need);
    expect(checkMemoryCap(model, spec, { capBytes: 0, flashAttention: true })).toBeUndefined();
    // a range the model lacks is the loader's to refuse
    const past = { ...spec, range: { start: 4, end: 9 } as typeof spec.range };
    expect(checkMemoryCap(model, past, { capBytes: 1, flashAttention: true })).toBeUndefined();
  });

  it("says it in GiB past a GiB", () => {
    const need = {
      weightBytes: 0.95 * GIB,
      kvBytes: 0.19 * GIB,
      computeBytes: 0.07 * GIB,
      total: 1.21 * GIB,
    };
    expect(memoryMisfit(need, GIB)).toBe(
      "need 1.21 GiB (weights 0.95 GiB + KV 0.19 GiB + compute 0.07 GiB), more than the memory cap of 1.00 GiB",
    );
    expect(memoryMisfit(need, 2 * GIB)).toBeUndefined();
  });
});

describe("a node's KV pool", () => {
  const llama = synthModel({ arch: "llama", ...MEASURED_SHAPE });
  const model = headerModel(parseGgufHeader(llama), llama.length);
  const spec = { range: layerRange(0, 8, 8), maxSequences: 16, batchTokens: 512, batchInvariant: true };
  const fits = (cells: number) => specMemory(model, { ...spec, kvCells: cells }, true).total;

  it("holds 4096 tokens for every session when nothing caps it, and halves until the range fits a cap", () => {
    expect(defaultPool(model, spec, { capBytes: 0, flashAttention: true })).toBe(16 * 4096);
    // a cap that holds 20,000 cells but not 32,768: the pool halves twice
    const cap = fits(20_000);
    expect(defaultPool(model, spec, { capBytes: cap, flashAttention: true })).toBe(16_384);
    expect(fits(16_384)).toBeLessThanOrEqual(cap);
    // nothing fits: the smallest, for the cap check to refuse with the numbers
    expect(defaultPool(model, spec, { capBytes: 1, flashAttention: true })).toBe(1024);
  });

  it("is one ordered pool for plain and sliding-window caches under fused attention, else a stream per session", () => {
    const b = { batchInvariant: true, maxSequences: 16, flashAttention: true };
    expect(kvStreams(b, uniformKv(4, 64))).toBe(1);
    // unfused attention (an estimate for a GPU backend): the engine keeps a stream per session
    expect(kvStreams({ ...b, flashAttention: false }, uniformKv(4, 64))).toBe(16);
    expect(kvStreams(b, [{ k: 64, v: 64, window: 8 }])).toBe(1);
    expect(kvStreams(b, [{ k: 64, v: 0, window: 0, indexer: 32 }])).toBe(16);
    expect(kvStreams(b, [{ k: 64, v: 0, window: 0, streams: "per-sequence" }])).toBe(16);
    expect(kvStreams({ ...b, batchInvariant: false }, [{ k: 64, v: 0, window: 0, indexer: 32 }])).toBe(1);
  });
});
