import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("continuous batching on one shard (native engine)", () => {
  it("batches 8 staggered sessions, each equal to itself alone; cancel and bad input stay local", async () => {
    const r = await denoRun(`${root}test/integration/batcher.deno.ts`);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // equal in the parity sense: identical greedy tokens, or a reported near-tie
    for (const a of out.agreements) expect(a.kind, JSON.stringify(a)).not.toBe("mismatch");
    expect(
      out.agreements.slice(0, 6).every((a: { kind: string; steps?: number }) =>
        a.kind !== "identical" || a.steps === 12
      ),
    )
      .toBe(true);
    expect(out.statsTogether.maxBatchSessions).toBeGreaterThanOrEqual(4);
    expect(out.cancelled).toEqual({
      "s-6": "cancelled: session s-6 cancelled",
      "s-7": "cancelled: session s-7 cancelled",
    });
    expect(out.kvAfterCancel).toBe(out.expectedKvAfterCancel);
    expect(out.refusals.over_budget).toBe("kv_full: KV budget: 1025 cells asked, 1024 of 1024 free");
    expect(out.refusals.unknown_session).toMatch(/^unknown_session/);
    expect(out.refusals.flood).toBe("ok,ok,ok,ok,overloaded,overloaded");
    expect(out.refusals.bad_step).toBe("bad_input");
    expect(out.refusals.good_beside_bad).toBe("1x384");
    expect(out.expired).toEqual(["bad", "flood", "good"]);
    expect(out.kvAtEnd).toBe(0);
  });
});
