import { describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { denoRun, root, routeParity } from "./strata.ts";
import { expectParity, parity } from "./parity-check.ts";

// The WASM build needs emscripten (apt; `strata test` installs it where it may run apt-get)
// and Chromium for the browser half. Where they are missing these skip, saying so.
const wasmDir = join(process.env.STRATA_CACHE ?? join(homedir(), ".cache", "strata"), "wasm");
const built = existsSync(wasmDir) &&
  readdirSync(wasmDir).some((d) => d.startsWith("cpu-") && existsSync(join(wasmDir, d, "strata.wasm")));
const chromium = existsSync(process.env.STRATA_CHROMIUM ?? "/usr/bin/chromium");
if (!built) console.warn("wasm tests skipped: no WASM build (needs emscripten: apt-get install emscripten)");
if (!chromium) console.warn("browser tests skipped: no Chromium (apt-get install chromium)");

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
    // threads 1 and 2 (pthreads) give the same logits
    expect(out.threadsLogitDiff).toBe(0);
    // an engine's worker refuses with the engine's own codes
    expect(out.workerErrors).toEqual({ pastTheModel: "bad_range", tooManyThreads: "bad_input" });
  });

  it("strata parity --backend wasm: greedy tokens of whole-model native, seams within tolerance, batched", async () => {
    const r = await parity(["--backend", "wasm", "--split", "0:12,12:30", "--threads", "1"]);
    expectParity(r, 1);
    expect(r.report.engine_backends).toEqual(["wasm-cpu", "wasm-cpu"]);
    expect(r.report.reference).toBe("native-cpu whole model");
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
});

describe.skipIf(!built || !chromium)("the WASM engine in headless Chromium", () => {
  // two tabs, one shard each, against whole-model native; passes as every parity run must
  const inTabs = async (backend: string) => {
    const r = await parity([
      "--backend",
      backend,
      "--host",
      "chromium",
      "--split",
      "0:12,12:30",
      "--threads",
      "1",
    ]);
    expectParity(r, 1);
    expect(r.report.host).toBe("chromium");
    expect(r.report.engine_backends).toEqual(["wasm-cpu", "wasm-cpu"]);
    return r;
  };

  it("a 2-shard split in two tabs: whole-model native's greedy tokens, seams within tolerance, batched", async () => {
    await inTabs("wasm");
  });

  it("asked for WebGPU on SwiftShader (no shader-f16), says why and passes on WASM CPU", async () => {
    const r = await inTabs("webgpu");
    const fallbacks = r.stderr.split("\n").filter((l) => l.includes("engine.fallback"));
    expect(fallbacks).toHaveLength(2); // one line per tab
    expect(fallbacks[0]).toMatch(/lacks shader-f16/);
  });
});
