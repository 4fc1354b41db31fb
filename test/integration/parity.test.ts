// Gate B: every shard of a split in its own process reproduces whole-model llama.cpp.
//
// The suite keeps one case per architecture and engine kind: each catalog model, glm-dsa and
// deepseek4 (with the splits they refuse) at 2 shards; the other synthetic architectures at 3 (a
// middle shard, a one-layer range); the Vulkan build once (the WASM engines: wasm.test.ts). The
// rest of the sweep, every one of these at 2 and at 3 shards, lives in checks/parity/sweep-cases.ts,
// each case held to what parity-check.ts asserts, and runs with
//   ./strata bench parity [--only smollm2 glm-dsa …]     (also part of ./strata bench)
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { root, strata } from "./strata.ts";
import { expectParity, parity } from "./parity-check.ts";

describe("parity on SmolLM2-135M (Q4_1)", () => {
  it("2 shards: identical greedy tokens, exact seams, batched sessions", async () => {
    const r = await parity(["--model", "smollm2", "--split", "0:12,12:30"]);
    expectParity(r, 1);
    expect(r.report.text).toMatch(/Paris/);
  });
});

describe("parity on Gemma 3 270M (Q4_K_M, sliding-window attention)", () => {
  it("2 shards, prompts past the 512-token sliding window", async () => {
    expectParity(
      await parity(["--model", "gemma3-270m", "--prompt-tokens", "600", "--split", "0:9,9:18"]),
      1,
    );
  });
});

const dir = mkdtempSync(join(tmpdir(), "strata-synth-"));

// A known engine bug (docs/engine.md, "Known gaps"): on an x86 CPU without AVX-512, DeepSeek-V3.2's
// indexer keeps another of its tied cells in a batch than alone (its top_k breaks ties by where
// a cell stands in a row that holds the batch's other cells too), so seed 11's batched sessions
// come within 6e-5 sigma of their lone logits, with the same tokens, not bit for bit. Seen on a
// 2-vCPU EPYC (AVX2, 2026-12-07) at every split; the AVX-512 EPYC before it matched exactly.
const avx512 = /\bavx512f\b/.test(existsSync("/proc/cpuinfo") ? readFileSync("/proc/cpuinfo", "utf8") : "");
const dsaGap = process.arch === "x64" && !avx512
  ? { why: "DeepSeek-V3.2's indexer top_k ties on a CPU without AVX-512", maxSigma: 1e-3 }
  : undefined;
describe("parity on a synthetic glm-dsa model (sparse attention: shared-indexer layers)", () => {
  it("2 shards cut at a full indexer layer; a cut inside a shared-indexer group is refused", async () => {
    const file = join(dir, "glm-dsa.gguf");
    expect((await strata(["model", "synth", "--arch", "glm-dsa", "--out", file, "--seed", "11"])).code).toBe(
      0,
    );
    // full indexer layers 0 and 3
    expectParity(await parity(["--model", file, "--split", "0:3,3:6"]), 1);
    const refused = await strata(["parity", "--model", file, "--split", "0:1,1:4,4:6"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/no range may start at layer 1: a shared-indexer layer reuses the top-k/);
  });
});

describe("parity on a synthetic deepseek4 model (hyper-connections, compressed keys, hash routing)", () => {
  it("2 shards past a 128-token compression; a cut inside the hash-routed layers is refused", async () => {
    const file = join(dir, "deepseek4.gguf");
    const w = await strata(["model", "synth", "--arch", "deepseek4", "--out", file, "--seed", "11"]);
    expect(w.code, w.stderr).toBe(0);
    const two = await parity(["--model", file, "--prompt-tokens", "160", "--split", "0:3,3:6"]);
    expectParity(two, 1);
    // the seam carries the whole residual: 4 streams of n_embd 64
    expect(two.report.seam_width).toBe(256);
    // layers 0 and 1 route by token id
    const refused = await strata(["parity", "--model", file, "--split", "0:1,1:4,4:6"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(
      /no range may start at layer 1: a hash-routed layer picks its experts by token id/,
    );
  });
});

describe.each(["llama", "qwen3", "qwen3moe", "gemma3", "deepseek2", "glm4moe", "deepseek32"])(
  "parity on a synthetic %s model",
  (arch) => {
    const file = join(dir, `${arch}.gguf`);
    it("3 shards", async () => {
      const w = await strata(["model", "synth", "--arch", arch, "--out", file, "--seed", "11"]);
      expect(w.code, w.stderr).toBe(0);
      expectParity(
        await parity(["--model", file, "--split", "0:1,1:4,4:6"]),
        2,
        arch === "deepseek32" ? dsaGap : undefined,
      );
    });
  },
);

describe("parity on the Vulkan build (lavapipe)", () => {
  const vulkan = spawnSync(`${root}strata`, ["build", "--backend", "vulkan", "--cached-only"], {
    encoding: "utf8",
  });
  const built = vulkan.status === 0 && existsSync(vulkan.stdout.trim());
  // lavapipe computes on the CPU at ~1 token/s and compiles every shader on first use,
  // so this run is small: 2 sessions, 8 steps
  it.skipIf(!built)("a synthetic llama split on Vulkan equals whole-model Vulkan", async () => {
    const file = join(dir, "vk-llama.gguf");
    await strata(["model", "synth", "--arch", "llama", "--out", file, "--seed", "5"]);
    const r = await strata([
      "parity",
      "--json",
      "--backend",
      "vulkan",
      "--model",
      file,
      "--split",
      "0:3,3:6",
      "--tokens",
      "8",
      "--sessions",
      "2",
    ], {
      GGML_VK_VISIBLE_DEVICES: "0",
    });
    expect(r.stdout.trim().startsWith("{"), r.stderr).toBe(true);
    const p = JSON.parse(r.stdout);
    expect(p.backend).toBe("native-vulkan");
    expect(p.tokens_match).toBe(true);
    expect(p.hidden_within_tolerance).toBe(true);
    expect(p.batched_match).toBe(true);
    expect(p.release_ok).toBe(true);
  });
  if (!built) console.warn("skipping Vulkan parity: no Vulkan build (./strata build --backend vulkan)");
});
