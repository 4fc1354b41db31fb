import { describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { denoRun, root } from "./strata.ts";

// ggml's WebGPU backend in the WASM engine under Deno, on the lavapipe adapter (software
// Vulkan, with shader-f16). Needs the webgpu flavor (`strata build --wasm --webgpu`, which
// `strata test` makes where emscripten is installed) and mesa-vulkan-drivers.
const wasmDir = join(process.env.STRATA_CACHE ?? join(homedir(), ".cache", "strata"), "wasm");
const built = existsSync(wasmDir) &&
  readdirSync(wasmDir).some((d) => d.startsWith("webgpu-") && existsSync(join(wasmDir, d, "strata.wasm")));
const lavapipe = existsSync("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json");
if (!built || !lavapipe) {
  console.warn("webgpu test skipped: no webgpu WASM build or no lavapipe (mesa-vulkan-drivers)");
}

describe.skipIf(!built || !lavapipe)("the WASM engine on WebGPU (Deno, lavapipe)", () => {
  it("decodes SmolLM2 on the GPU with native's greedy tokens (near-tie rule), and refuses an adapter without shader-f16", async () => {
    const r = await denoRun(`${root}test/integration/webgpu.deno.ts`, { STEPS: "6" });
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(out.backends).toMatch(/WebGPU/);
    // another backend: a differing pick only where the reference nearly chose it (reported)
    console.log(
      `WebGPU vs WASM CPU: ${JSON.stringify(out.vsCpu)}; vs native: ${JSON.stringify(out.vsNative)}`,
    );
    expect(out.vsCpu.kind).not.toBe("mismatch");
    if (out.vsNative) expect(out.vsNative.kind).not.toBe("mismatch");
    // f16 storage and accumulation on the GPU: logits within a few units of CPU's (σ ≈ 2.6)
    expect(out.maxAbsDiffLogitsVsCpu).toBeLessThan(3);
    // one GPU wait per decode step: the output's buffer map (patch 0005 drops the queue wait)
    for (const n of out.webgpu.readbacks) expect(n).toBe(1);
    expect(out.noF16).toMatch(/lacks the shader-f16 feature/);
    // llama.cpp's grammar in the ASYNCIFY build: a bad one refused without taking the module down
    expect(out.grammar.bad).toMatch(/^grammar: Undefined rule identifier/);
    expect(out.grammar.allowed).toBeGreaterThan(0);
  });
});
