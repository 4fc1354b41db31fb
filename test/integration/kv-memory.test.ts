import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("KV memory, estimated from the header and allocated by llama.cpp", () => {
  it("agree to the byte: sliding windows, latent attention's K-only cache, indexer keys, nextn layers", async () => {
    const r = await denoRun(`${root}test/integration/kv-memory.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const rows = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(rows).toHaveLength(36);
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
  });
});
