import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("long contexts on strata up's defaults (the openai client)", () => {
  it("a 1,500-token chat equals whole-model llama.cpp; 4 long streamed chats at once equal themselves alone; nodes end empty", async () => {
    const r = await denoRun(`${root}test/integration/long-context.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    console.log(
      `context ${out.context_length}; long chat ${out.long.prompt_tokens} tokens in ${
        Math.round(out.long.ms)
      } ms; ` +
        `${out.concurrent.sessions} at once in ${Math.round(out.concurrent.wall_ms)} ms; nodes ${
          JSON.stringify(out.nodes_after)
        }`,
    );
    // the model's trained context, not n_ctx / n_seq_max
    expect(out.context_length).toBe(8192);
    expect(out.long.error).toBeUndefined();
    expect(out.long.gateway_prompt_tokens).toBe(out.long.prompt_tokens);
    expect(out.long.prompt_tokens).toBeGreaterThanOrEqual(1500);
    expect(out.long.text.length).toBeGreaterThan(0);
    expect(out.long.text).toBe(out.long.reference);
    expect(out.concurrent.alone_errors).toEqual([]);
    expect(out.concurrent.errors).toEqual([]);
    expect(out.concurrent.completed).toBe(4);
    expect(out.concurrent.differing).toEqual([]);
    for (const n of out.nodes_after) {
      expect(n.sessions, JSON.stringify(n)).toBe(0);
      // what KV is held is prefix entries: finished chats kept for the next turn
      expect(n.kv_cells_used, JSON.stringify(n)).toBeLessThanOrEqual(n.prefix_cells);
      expect(n.kv_layout).toBe("ordered");
      // every engine call one graph pass
      expect(n.graph_passes, JSON.stringify(n)).toBe(n.batches);
    }
  });
});
