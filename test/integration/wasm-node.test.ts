import { describe, expect, it } from "vitest";
import * as esbuild from "esbuild";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { denoRun, nodeRun, root } from "./strata.ts";
import { forcedAgreement, type Step } from "../../src/parity/compare.ts";
import { CROSS_ENGINE_TOLERANCE } from "../../src/parity/tolerance.ts";

// The module Deno and the browser load must load unchanged in Node too.
const wasmDir = join(process.env.STRATA_CACHE ?? join(homedir(), ".cache", "strata"), "wasm");
const built = existsSync(wasmDir) &&
  readdirSync(wasmDir).some((d) => d.startsWith("cpu-") && existsSync(join(wasmDir, d, "strata.wasm")));
if (!built) {
  console.warn("Node wasm test skipped: no WASM build (needs emscripten: apt-get install emscripten)");
}

const STEPS = 16;

describe.skipIf(!built)("the WASM engine in Node", () => {
  it("runs a 2-shard split with pthreads (native's greedy tokens by the near-tie rule, Deno's logits bit for bit) and a route of two nodes of the one runtime", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "strata-node-"));
    try {
      const nativeLogits = join(tmp, "native.f32");
      const ref = await denoRun(`${root}test/integration/native-greedy.deno.ts`, {
        STEPS: String(STEPS),
        LOGITS_FILE: nativeLogits,
        WASM_LOGITS_FILE: join(tmp, "deno-wasm.f32"),
      });
      expect(ref.code, ref.stderr.slice(-3000)).toBe(0);
      const native = JSON.parse(ref.stdout.trim().split("\n").pop()!);

      const entry = join(tmp, "wasm-node.mjs");
      await esbuild.build({
        entryPoints: [`${root}test/integration/wasm-node.entry.ts`],
        bundle: true,
        platform: "node",
        format: "esm",
        target: "node18",
        outfile: entry,
        logLevel: "silent",
        // the gRPC and WebSocket packages are CommonJS and require Node's built-ins
        banner: {
          js: 'import { createRequire } from "node:module"; const require = createRequire(import.meta.url);',
        },
      });
      const wasmLogits = join(tmp, "wasm.f32");
      const r = await nodeRun(entry, [
        native.wasmDir,
        native.modelPath,
        JSON.stringify({ prompt: native.prompt, tokens: native.tokens }),
        wasmLogits,
      ]);
      expect(r.code, r.stderr.slice(-3000)).toBe(0);
      const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
      expect(out.runtime).toMatch(/^node /);
      expect(out.backends).toEqual(["wasm-cpu", "wasm-cpu"]);

      const f32 = (path: string) => new Float32Array(Uint8Array.from(readFileSync(path)).buffer);
      const [a, b, d] = [f32(nativeLogits), f32(wasmLogits), f32(join(tmp, "deno-wasm.f32"))];
      expect(b.length).toBe(a.length);
      expect(d.length).toBe(a.length);
      let vsDeno = 0;
      for (let i = 0; i < a.length; i++) vsDeno = Math.max(vsDeno, Math.abs(d[i] - b[i]));
      // across engines (x86 SIMD vs WASM SIMD) a pick may differ only where native nearly chose otherwise
      const dim = a.length / STEPS;
      const steps = (logits: Float32Array, tokens: number[]): Step[] =>
        tokens.map((token, i) => ({ token, logits: logits.subarray(i * dim, (i + 1) * dim) }));
      const vsNative = forcedAgreement(steps(a, native.tokens), steps(b, out.tokens), CROSS_ENGINE_TOLERANCE);
      console.log(
        `Node WASM split vs native whole, ${STEPS} teacher-forced steps: ${vsNative.kind}, max |Δ logit| ${
          vsNative.maxDiffSigma.toFixed(3)
        } σ, near-ties ${
          JSON.stringify(
            vsNative.divergences.map((v) => ({ step: v.step, gap_sigma: +v.gapSigma.toFixed(3) })),
          )
        }; vs the same split under Deno ${vsDeno}`,
      );
      expect(vsNative.kind, JSON.stringify(vsNative)).not.toBe("mismatch");
      // the one node runtime under Node: two nodes, gRPC seams, generating on their own. Native's
      // greedy tokens until the first step the teacher-forced split found a near-tie, free after it
      expect(out.route.engines).toEqual(["wasm-cpu", "wasm-cpu"]);
      const firstTie = vsNative.divergences.length
        ? Math.min(...vsNative.divergences.map((v) => v.step))
        : STEPS;
      expect(out.route.tokens).toHaveLength(STEPS);
      expect(out.route.tokens.slice(0, firstTie)).toEqual(native.tokens.slice(0, firstTie));
      console.log(
        `Node route of 2 nodes (${out.route.urls.join(" → ")}): ${
          firstTie === STEPS
            ? "native's greedy tokens"
            : `native's tokens up to the near-tie at step ${firstTie}`
        }`,
      );
      // the same module and kernels in another runtime: identical, not merely close
      expect(vsDeno).toBe(0);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
