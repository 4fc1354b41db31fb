// The fuzz harness, small: every target's seeded inputs (kept regressions first) end in an
// acceptance or a clear refusal, never in an error the checks missed; and a planted bug is
// found, so a clean count means something. `strata fuzz` runs the same targets for longer.
import { describe, expect, it } from "vitest";
import { fuzzTarget } from "../../checks/fuzz/fuzz.ts";
import { mutate, prng } from "../../checks/fuzz/mutate.ts";
import { regressionsOf } from "../../checks/fuzz/regressions.ts";
import { type FuzzTarget, TARGETS } from "../../checks/fuzz/targets.ts";

describe("fuzzing", () => {
  for (const t of TARGETS) {
    it(`${t.name}: 3,000 changed inputs, each accepted or refused clearly`, async () => {
      const regressions = regressionsOf(t.name);
      const r = await fuzzTarget(t, { seed: 7, inputs: 3000, regressions });
      expect(r.distinct_failures, JSON.stringify(r.distinct_failures)).toEqual([]);
      expect(r.timeouts).toBe(0);
      expect(r.inputs).toBe(3000 + regressions.length);
      // the changes reach both sides of the checks: some inputs pass them, most do not
      expect(r.accepted).toBeGreaterThan(0);
      expect(r.refused).toBeGreaterThan(r.inputs / 4);
    });
  }

  it("finds a planted bug, and tells it from refusals", async () => {
    // a length-prefixed record whose reader trusts the length: a RangeError past the end
    const buggy: FuzzTarget = {
      name: "planted",
      proto: false,
      seeds: () => Promise.resolve([Uint8Array.from([3, 1, 2, 3]), Uint8Array.from([1, 9])]),
      start: () =>
        Promise.resolve((b: Uint8Array) => {
          if (b.length === 0) throw new Error("empty record");
          new DataView(b.buffer, b.byteOffset + 1, b[0]);
        }),
    };
    const r = await fuzzTarget(buggy, { seed: 1, inputs: 500 });
    expect(r.failures).toBeGreaterThan(0);
    expect(r.distinct_failures.map((f) => f.signature.split(":")[0])).toContain("RangeError");
    expect(r.refused).toBeGreaterThan(0);
  });

  it("gives the same inputs for the same seed", () => {
    const seed = Uint8Array.from([8, 1, 18, 3, 97, 98, 99]);
    const run = (s: number) => {
      const next = prng(s);
      return Array.from({ length: 50 }, () => Array.from(mutate(seed, [seed], next, true)).join(","));
    };
    expect(run(5)).toEqual(run(5));
    expect(run(5)).not.toEqual(run(6));
  });
});
