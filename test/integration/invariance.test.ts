import { describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { denoRun, root } from "./strata.ts";

const wasmDir = join(process.env.STRATA_CACHE ?? join(homedir(), ".cache", "strata"), "wasm");
const flavorBuilt = (flavor: string) =>
  existsSync(wasmDir) &&
  readdirSync(wasmDir).some((d) => d.startsWith(`${flavor}-`) && existsSync(join(wasmDir, d, "strata.wasm")));
const wasmBuilt = flavorBuilt("cpu");
if (!wasmBuilt) console.warn("WASM invariance skipped: no WASM build (needs emscripten)");
// WebGPU under Deno: lavapipe (software Vulkan) is the adapter here
const webgpuReady = flavorBuilt("webgpu") && existsSync("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json");
if (!webgpuReady) console.warn("WebGPU invariance skipped: no webgpu WASM build or no lavapipe");

interface Result {
  mates: number;
  pool?: string;
  first_diff_step: number;
  max_abs_diff: number;
  passes_per_call?: number;
}

// One session alone, then batched with 1–15 batch-mates that join over time, half of them
// released out of order and new ones joining into the holes, while its context crosses 512
// cells; then in a pool that compacts under it; MODEL=synth: past 8192 positions. Bit for bit.
async function invariance(engine: string, o: { invariant?: boolean; model?: string; threads?: number } = {}) {
  const r = await denoRun(`${root}test/integration/invariance.deno.ts`, {
    ENGINE: engine,
    INVARIANT: o.invariant === false ? "0" : "1",
    MODEL: o.model ?? "",
    ...(o.threads ? { THREADS: String(o.threads) } : {}),
  });
  expect(r.code, r.stderr.slice(-3000)).toBe(0);
  const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
  console.log(`${out.engine} invariant=${out.invariant} ${out.kv_layout}: ${JSON.stringify(out.results)}`);
  return out as {
    engine: string;
    kv_layout: string;
    cells_crossed: number;
    results: Result[];
    passes_by_slots: Record<string, number>;
    kv_cells_used_at_end: number;
  };
}

function expectIdentical(results: Result[]) {
  for (const r of results) {
    expect(r.first_diff_step, JSON.stringify(r)).toBe(-1);
    expect(r.max_abs_diff).toBe(0);
  }
}

describe("batch-invariant decoding: a session's logits do not depend on who else is in the batch", () => {
  it("native CPU: bit-identical alone and batched with 1 to 15 mates in one ordered pool, through holes, out-of-order releases and a compaction; every batch one graph pass", async () => {
    const out = await invariance("native", { threads: 2 });
    expect(out.kv_layout).toBe("ordered");
    expect(out.cells_crossed).toBeGreaterThan(512);
    expect(out.results.map((r) => r.pool ?? r.mates)).toEqual([1, 3, 15, "compacted"]);
    expectIdentical(out.results);
    // however the batch's sequences lie in the slot table, one pass over the weights
    for (const r of out.results.filter((x) => x.passes_per_call !== undefined)) {
      expect(r.passes_per_call).toBe(1);
    }
    expect(out.passes_by_slots).toEqual({ in_order: 1, scattered: 1, reversed: 1 });
    expect(out.kv_cells_used_at_end).toBe(0);
  });

  it("native CPU: bit-identical past 8192 positions (a synthetic llama trained for 16K)", async () => {
    const out = await invariance("native", { model: "synth" });
    expect(out.cells_crossed).toBeGreaterThan(8192);
    expectIdentical(out.results);
  });

  it("native CPU, Q8_0 weights (llamafile's sgemm for batches, vec_dot for a lone row): bit-identical, the same runs", async () => {
    const out = await invariance("native", { model: "q8_0" });
    expect(out.kv_layout).toBe("ordered");
    expect(out.results.map((r) => r.pool ?? r.mates)).toEqual([1, 3, 15, "compacted"]);
    expectIdentical(out.results);
  });

  it("native CPU without it (--no-batch-invariant): the same runs part", async () => {
    // the checks above are not vacuous: the shared pool and the fast kernels do change the logits
    const out = await invariance("native", { invariant: false });
    expect(out.kv_layout).toBe("shared");
    expect(out.results.some((r) => r.first_diff_step >= 0)).toBe(true);
  });

  it.skipIf(!wasmBuilt)("WASM CPU: bit-identical alone and batched, the same runs", async () => {
    const out = await invariance("wasm", { threads: 2 });
    expect(out.engine).toBe("wasm-cpu");
    expect(out.kv_layout).toBe("ordered");
    expectIdentical(out.results);
    expect(out.passes_by_slots).toEqual({ in_order: 1, scattered: 1, reversed: 1 });
  });

  it.skipIf(!webgpuReady)(
    "WebGPU: bit-identical alone and batched (matmuls one column a workgroup, gathered attention), the same runs on a small synthetic llama",
    async () => {
      const out = await invariance("webgpu");
      expect(out.engine).toBe("wasm-webgpu");
      expect(out.kv_layout).toBe("ordered");
      expect(out.cells_crossed).toBeGreaterThan(256);
      expect(out.results.map((r) => r.pool ?? r.mates)).toEqual([1, 3, 15, "compacted"]);
      expectIdentical(out.results);
      expect(out.passes_by_slots).toEqual({ in_order: 1, scattered: 1, reversed: 1 });
      expect(out.kv_cells_used_at_end).toBe(0);
    },
  );

  it.skipIf(!webgpuReady)("WebGPU without it: the same runs part", async () => {
    const out = await invariance("webgpu", { invariant: false });
    expect(out.engine).toBe("wasm-webgpu");
    expect(out.results.some((r) => r.first_diff_step >= 0)).toBe(true);
  });
});
