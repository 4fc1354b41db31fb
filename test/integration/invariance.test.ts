import { describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { denoRun, root } from "./strata.ts";

const wasmDir = join(process.env.STRATA_CACHE ?? join(homedir(), ".cache", "strata"), "wasm");
const wasmBuilt = existsSync(wasmDir) &&
  readdirSync(wasmDir).some((d) => d.startsWith("cpu-") && existsSync(join(wasmDir, d, "strata.wasm")));
if (!wasmBuilt) console.warn("WASM invariance skipped: no WASM build (needs emscripten)");

// One session alone, then batched with 1–15 batch-mates that join over time, one released
// halfway, in a pool with holes, while its context crosses 512 cells: bit for bit.
async function invariance(engine: string, invariant = true) {
  const r = await denoRun(`${root}test/integration/invariance.deno.ts`, {
    ENGINE: engine,
    INVARIANT: invariant ? "1" : "0",
  });
  expect(r.code, r.stderr.slice(-3000)).toBe(0);
  const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
  console.log(`${out.engine} invariant=${out.invariant}: ${JSON.stringify(out.results)}`);
  return out;
}

describe("batch-invariant decoding: a session's logits do not depend on who else is in the batch", () => {
  it("native CPU: bit-identical alone and batched with 1 to 15 mates, across a release and 512 cells", async () => {
    const out = await invariance("native");
    expect(out.cells_crossed).toBeGreaterThan(512);
    expect(out.results.map((r: { mates: number }) => r.mates)).toEqual([1, 3, 15]);
    for (const r of out.results) {
      expect(r.first_diff_step, JSON.stringify(r)).toBe(-1);
      expect(r.max_abs_diff).toBe(0);
    }
    expect(out.kv_cells_used_at_end).toBe(0);
  });

  it("native CPU without it (--no-batch-invariant): the same runs part once the context passes 512 cells", async () => {
    // the check above is not vacuous: the shared pool and the fast kernels do change the logits
    const out = await invariance("native", false);
    expect(out.results.some((r: { first_diff_step: number }) => r.first_diff_step >= 0)).toBe(true);
  });

  it.skipIf(!wasmBuilt)("WASM CPU: bit-identical alone and batched, the same runs", async () => {
    const out = await invariance("wasm");
    expect(out.engine).toBe("wasm-cpu");
    for (const r of out.results) {
      expect(r.first_diff_step, JSON.stringify(r)).toBe(-1);
      expect(r.max_abs_diff).toBe(0);
    }
  });
});
