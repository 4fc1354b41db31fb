import { describe, expect, it } from "vitest";
import { cohortsPay, decideCohorts } from "../../src/scheduler/cohort-rule.ts";

// Cohorts cost a shard one more pass over its weights and save half a batch's own arithmetic:
// kept where a batch of n costs three times its weights' pass or more (a + s·n ≥ 3a).
describe("the cohort rule", () => {
  it("takes turns where a batch costs its sessions' arithmetic (compute-bound)", () => {
    // the 1 GB synthetic llama on two cores: 33.8 ms alone, 159.7 ms for 8
    expect(cohortsPay({ oneMs: 33.8, batchMs: 159.7, batchSessions: 8 })).toBe(true);
    expect(cohortsPay({ oneMs: 10, batchMs: 160, batchSessions: 16 })).toBe(true);
  });

  it("batches all it has where a batch costs about one step (memory-bound)", () => {
    expect(cohortsPay({ oneMs: 10, batchMs: 10.5, batchSessions: 16 })).toBe(false);
    expect(cohortsPay({ oneMs: 10, batchMs: 20, batchSessions: 8 })).toBe(false);
  });

  it("breaks even where half the batch's arithmetic is one weights' pass", () => {
    // a = 10, s = 1: s·n/2 = a at n = 20, batch = 30 (three times a)
    expect(cohortsPay({ oneMs: 11, batchMs: 30, batchSessions: 20 })).toBe(true);
    expect(cohortsPay({ oneMs: 11, batchMs: 29, batchSessions: 20 })).toBe(false);
  });

  it("never takes turns on what it could not measure", () => {
    expect(cohortsPay({ oneMs: 10, batchMs: 100, batchSessions: 1 })).toBe(false);
    expect(cohortsPay({ oneMs: 0, batchMs: 100, batchSessions: 8 })).toBe(false);
    expect(cohortsPay({ oneMs: NaN, batchMs: 100, batchSessions: 8 })).toBe(false);
  });

  it("keeps what the node was told, else the measurement, else the backend", () => {
    const flat = { oneMs: 10, batchMs: 10, batchSessions: 16 };
    expect(decideCohorts(true, flat, false)).toEqual({ cohorts: true, by: "set" });
    expect(decideCohorts(false, undefined, true)).toEqual({ cohorts: false, by: "set" });
    expect(decideCohorts(undefined, flat, true)).toEqual({ cohorts: false, by: "measured" });
    expect(decideCohorts(undefined, undefined, true)).toEqual({ cohorts: true, by: "backend" });
  });
});
