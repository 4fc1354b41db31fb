import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("KV memory, estimated from the header and allocated by llama.cpp", () => {
  it("agree to the byte, sliding windows (Gemma 3) included", async () => {
    const r = await denoRun(`${root}test/integration/kv-memory.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const rows = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(rows).toHaveLength(12);
    for (const row of rows) expect(row.estimated, JSON.stringify(row)).toBe(row.allocated);
    // Gemma 3 270M: K and V of 256 (one KV head of 256), not n_embd × kv heads / heads = 160
    const g = rows.find((x: { model: string; range: string }) =>
      x.model === "gemma3-270m" && x.range === "whole"
    );
    expect(g.allocated).toBe(18 * 4096 * 2 * 256 * 2);
  });
});
