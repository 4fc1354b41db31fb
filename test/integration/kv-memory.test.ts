import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("KV memory, estimated from the header and allocated by llama.cpp", () => {
  it("agree to the byte: sliding windows, latent attention's K-only cache, indexer keys, nextn layers, compressed keys", async () => {
    const r = await denoRun(`${root}test/integration/kv-memory.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const rows = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(rows).toHaveLength(42);
    for (const row of rows) expect(row.estimated, JSON.stringify(row)).toBe(row.allocated);
    // Gemma 3 270M: K and V of 256 (one KV head of 256), not n_embd × kv heads / heads = 160
    const g = rows.find((x: { model: string; range: string }) =>
      x.model === "gemma3-270m" && x.range === "whole"
    );
    expect(g.allocated).toBe(18 * 4096 * 2 * 256 * 2);
    // DeepSeek-V2's latent cache: one K row of kv_lora_rank + rope (32 + 16) per token, no V
    const d = rows.find((x: { model: string; range: string }) =>
      x.model === "deepseek2.gguf" && x.range === "whole"
    );
    expect(d.allocated).toBe(6 * 4096 * 48 * 2);
    // glm-dsa: the same latent K, and 64-wide indexer keys in the full indexer layers 0 and 3
    const s = rows.find((x: { model: string; range: string }) =>
      x.model === "glm-dsa.gguf" && x.range === "whole"
    );
    expect(s.allocated).toBe((6 * 48 + 2 * 64) * 4096 * 2);
    // DeepSeek-V3.2: indexer keys in every layer
    const v32 = rows.find((x: { model: string; range: string }) =>
      x.model === "deepseek32.gguf" && x.range === "whole"
    );
    expect(v32.allocated).toBe(6 * (48 + 64) * 4096 * 2);
    // DeepSeek-V4, 4 sequences of 1024 cells: a 16-wide K row per token in all 7 layers (the MTP
    // layer's too); every 4 tokens a compressed K and a 64-wide indexer key (layers 0 and 3: 256
    // rows a sequence, llama.cpp's rounding), every 128 a compressed K (layers 1 and 4: 256
    // rows too); the compressors' f32 state (2 × 8 × 32 + 2 × 8 × 128 floats in layers 0 and 3,
    // 2 × 128 × 16 in 1 and 4, per sequence)
    const v4 = rows.find((x: { model: string; range: string; batchInvariant: boolean }) =>
      x.model === "deepseek4.gguf" && x.range === "whole" && x.batchInvariant
    );
    const state = 4 * 4 * (2 * (2 * 8 * 32 + 2 * 8 * 128) + 2 * (2 * 128 * 16));
    expect(v4.allocated).toBe(7 * 4096 * 16 * 2 + 2 * 1024 * (16 + 64) * 2 + 2 * 1024 * 16 * 2 + state);
  });
});
