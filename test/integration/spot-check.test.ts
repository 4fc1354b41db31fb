import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("spot checks", () => {
  it("remove nodes that turn dishonest after admission, first and last layers alike; honest nodes stay", async () => {
    const r = await denoRun(`${root}test/integration/spot-check.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // all four passed admission: the liars answer the probe honestly
    expect(out.admittedFirst, JSON.stringify(out)).toEqual([
      "honest-first",
      "honest-last",
      "late-first",
      "late-last",
    ]);
    expect(out.final["late-first"]).toMatch(/^refused: spot check: max \|Δ\|/);
    expect(out.final["late-last"]).toMatch(/^refused: spot check: (margin|sampled token)/);
    expect(out.final["honest-first"]).toBe("admitted");
    expect(out.final["honest-last"]).toBe("admitted");
    // the honest ones were never anything but admitted once admitted
    for (const n of ["honest-first", "honest-last"]) expect(out.seen[n].slice(-1)).toEqual(["admitted"]);
  });
});
