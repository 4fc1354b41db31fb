import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("concurrency as users see it (strata up --routes 2, the openai client)", () => {
  it("64 greedy chats complete, each equal to its alone answer byte for byte; no request takes all the memory; leavers free their cells; a flood is refused past the queue", async () => {
    const r = await denoRun(`${root}test/integration/burst.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    console.log(
      `64 at once in ${Math.round(out.burst_ms)} ms, ${out.queued_total} queued; nodes after: ${
        JSON.stringify(out.nodes_after)
      }`,
    );
    expect(out.requests).toBe(64);
    expect(out.errors).toEqual([]);
    // batch-invariant nodes: load changes nothing in a greedy answer
    expect(out.differing).toEqual([]);
    // no session left; what KV is held is prefix entries (finished chats kept for the next turn)
    for (const n of out.nodes_after) {
      expect(n.sessions, JSON.stringify(n)).toBe(0);
      expect(n.kv_cells_used, JSON.stringify(n)).toBeLessThanOrEqual(n.prefix_cells);
    }
    // they shared batches: 32 streams a route at once
    expect(Math.max(...out.nodes_after.map((n: { max_batch_sessions: number }) => n.max_batch_sessions)))
      .toBeGreaterThan(1);

    // a request without max_tokens is an ordinary one: 16 others complete while it runs
    console.log(
      `long answer: ${JSON.stringify(out.long)}, others done before it: ${out.others_done_before_long}`,
    );
    expect(out.long.status).toBe(200);
    // it ran to the context --ctx-size gives a session, and ended as a request at max_tokens does
    expect(out.long.finish).toBe("length");
    expect(out.long.tokens).toBeGreaterThan(out.ctx_size - 100);
    expect(out.long.tokens).toBeLessThan(out.ctx_size);
    expect(out.others_ok).toBe(16);
    expect(out.others_done_before_long).toBe(16);

    // a non-streamed client that leaves frees its cells on every node within a second
    console.log(
      `KV while the client waited ${out.kv_while_client_there}, after it left ${out.kv_after_client_left} (${
        Math.round(out.freed_ms)
      } ms)`,
    );
    // its route's two nodes hold its cells (the other route is idle), on top of what they kept
    const before = out.kv_before_client as number[];
    expect(out.kv_while_client_there.filter((c: number, k: number) => c > before[k])).toHaveLength(2);
    expect(out.kv_after_client_left.every((c: number, k: number) => c <= before[k])).toBe(true);
    expect(out.freed_ms).toBeGreaterThanOrEqual(0);
    expect(out.freed_ms).toBeLessThan(1000);

    // 256 at once, queue of 64: the excess get 429 with Retry-After, nothing hangs, nodes end empty
    console.log(`flood of 256: ${JSON.stringify(out.flood)}`);
    expect(out.flood.other).toEqual([]);
    expect(out.flood.ok + out.flood.refused).toBe(256);
    expect(out.flood.refused).toBeGreaterThan(0);
    expect(out.flood.refused_with_retry_after).toBe(out.flood.refused);
    for (const n of out.nodes_at_end) {
      expect(n.sessions, JSON.stringify(n)).toBe(0);
      expect(n.kv_cells_used, JSON.stringify(n)).toBeLessThanOrEqual(n.prefix_cells);
    }
  });
});
