import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("continuous batching on one shard (native engine)", () => {
  it("batches 8 staggered sessions, each equal to itself alone; cancel and bad input stay local", async () => {
    const r = await denoRun(`${root}test/integration/batcher.deno.ts`);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // batch-invariant engine: each session's logits batched equal its logits alone, bit for bit
    for (const a of out.agreements) {
      expect(a.kind, JSON.stringify(a)).toBe("identical");
      expect(a.maxDiffSigma).toBe(0);
    }
    expect(out.agreements.map((a: { steps: number }) => a.steps)).toEqual([12, 12, 12, 12, 12, 12, 4, 4]);
    // session i joins after the first session's step i: at its steps 8 to 11 sessions 1 to 5 still run
    expect(out.statsTogether.maxBatchSessions).toBeGreaterThanOrEqual(6);
    expect(out.cancelled).toEqual({
      "s-6": "cancelled: session s-6 cancelled",
      "s-7": "cancelled: session s-7 cancelled",
    });
    expect(out.kvAfterCancel).toBe(out.expectedKvAfterCancel);
    // one pool of 1024 cells for 8 sessions: any one may grow to all of it, never reserved at open
    expect(out.refusals.over_budget).toBe(
      "kv_full: KV budget: 1025 cells asked; one session holds at most 1024 here",
    );
    expect(out.refusals.unknown_session).toMatch(/^unknown_session/);
    expect(out.refusals.flood).toBe("ok,ok,ok,ok,overloaded,overloaded");
    expect(out.refusals.bad_step).toBe("bad_input");
    expect(out.refusals.good_beside_bad).toBe("1x384");
    expect(out.expired).toEqual(["bad", "flood", "good"]);
    expect(out.kvAtEnd).toBe(0);
  });
});
