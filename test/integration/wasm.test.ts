import { describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { denoRun, root, routeParity } from "./strata.ts";

// The WASM build needs emscripten (apt); where it has been built (`strata build --wasm`),
// this runs, as the Vulkan parity test does where that build exists.
const wasmDir = join(process.env.STRATA_CACHE ?? join(homedir(), ".cache", "strata"), "wasm");
const built = existsSync(wasmDir) &&
  readdirSync(wasmDir).some((d) => d.startsWith("cpu-") && existsSync(join(wasmDir, d, "strata.wasm")));

describe.skipIf(!built)("the WASM engine (CPU, under Deno)", () => {
  it("runs a 2-shard split of SmolLM2 exactly like the whole model on the same engine, batched too", async () => {
    const r = await denoRun(`${root}test/integration/wasm.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    for (const s of out.sessions) expect(s.wasmTokens).toEqual(s.wasmWholeTokens);
    // range execution adds nothing: the split's logits are the whole model's, bit for bit
    expect(out.maxAbsDiffLogitsVsWasmWhole).toBe(0);
    // two sessions in one batch give what each gives alone
    expect(out.batched[0]).toEqual(out.sessions[0].wasmTokens);
    expect(out.batched[1]).toEqual(out.sessions[1].wasmTokens);
    // against native x86 kernels the numerics differ (reported, see docs/engine.md)
    expect(out.hiddenScale).toBeGreaterThan(0);
  });

  // each session alone equals whole-model native; together they match; cancel frees exactly
  // deno-lint-ignore no-explicit-any -- a parsed JSON report
  const routeOk = (out: Record<string, any>) => {
    expect(out.tokens_match, JSON.stringify(out.alone_vs_whole)).toBe(true);
    expect(out.together_match, JSON.stringify(out.together.agreements)).toBe(true);
    expect(out.cancel_ok).toBe(true);
  };

  it("runs in a mixed route over real seams: native → WASM node → native equals whole-model native", async () => {
    const out = await routeParity([
      "--transport",
      "direct",
      "--split",
      "0:10,10:20,20:30",
      "--engines",
      "native,wasm,native",
    ]);
    expect(out.engines).toEqual(["native", "wasm", "native"]);
    routeOk(out);
  });

  it("strata parity --backend wasm: a 2-node WASM route equals whole-model native llama.cpp", async () => {
    const out = await routeParity(["--backend", "wasm"]);
    expect(out.engines).toEqual(["wasm", "wasm"]);
    routeOk(out);
  });
});
