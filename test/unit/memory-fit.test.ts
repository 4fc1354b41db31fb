import { describe, expect, it } from "vitest";
import { memoryMisfit, rangeMemory } from "../../src/engine/memory-fit.ts";
import { uniformKv } from "../../src/gguf/kv-shape.ts";
import { WASM32_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";

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
