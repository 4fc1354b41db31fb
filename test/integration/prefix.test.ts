import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

describe("prefix reuse on a route (strata up, two native nodes; a second gateway prefills cold)", () => {
  it("every answer that reused a prefix equals its cold answer byte for byte, under 8 sessions and evictions", async () => {
    const r = await denoRun(`${root}test/integration/prefix.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);

    // one conversation, three turns behind a ~330-token system prompt
    out.conversation.forEach((t: Json, i: number) => {
      for (const a of [t.warm, t.again, t.cold]) {
        expect([a.status, a.error], JSON.stringify(a)).toEqual([200, undefined]);
      }
      expect(t.warm.text, `turn ${i}`).toBe(t.cold.text);
      expect(t.again.text, `turn ${i} asked again`).toBe(t.cold.text);
      // the cold gateway offers no prefix; the same prompt asked again finds its own
      expect(t.cold.cached).toBe(0);
      expect(t.again.cached).toBeGreaterThan(0);
      expect(t.again.cached % 64).toBe(0);
      expect(t.again.prefix.nodes).toHaveLength(2);
      // and the route's answer is whole-model llama.cpp's (or parts from it only at a near-tie)
      if (t.warm.text !== t.reference) expect(t.at?.nearTie, JSON.stringify(t)).toBe(true);
    });
    // each later turn starts from the turn before it
    for (const t of out.conversation.slice(1)) expect(t.warm.cached).toBeGreaterThan(0);

    // eight users at once, two turns each: every answer the cold one, and some reused
    let reused = 0;
    for (const phase of [out.concurrent.first, out.concurrent.second]) {
      for (const { warm, cold } of phase) {
        expect([warm.status, cold.status], JSON.stringify({ warm, cold })).toEqual([200, 200]);
        expect(warm.text).toBe(cold.text);
        if (warm.cached > 0) reused++;
      }
    }
    expect(reused).toBeGreaterThan(0);
    // the shared system prompt: every first turn starts from a copy of an entry the conversation left
    for (const { warm } of out.concurrent.first) expect(warm.cached).toBeGreaterThan(0);
    // entries gave way (budget and pool) and never failed a live session (every status 200);
    // what the nodes keep stays within their budget
    for (const n of Object.values(out.after_concurrent) as Json[]) {
      expect(n.evictions).toBeGreaterThan(0);
      expect(n.cells).toBeLessThanOrEqual(n.budget_cells);
      expect(n.hits).toBeGreaterThan(0);
    }
  });
});
