import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("strata model certify", () => {
  it("computes the reference range by range under a cap, equal to the whole model; signed; a tracker without one refuses", async () => {
    const r = await denoRun(`${root}test/integration/certify.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // a 98 MB model under a 40 MB cap: several ranges, covering every layer in order
    const ranges = out.certified.ranges.map((s: string) => s.split(":").map(Number));
    expect(ranges.length).toBeGreaterThan(1);
    expect(ranges[0][0]).toBe(0);
    expect(ranges.at(-1)[1]).toBe(30);
    for (let i = 1; i < ranges.length; i++) expect(ranges[i][0]).toBe(ranges[i - 1][1]);
    // same engine, same kernels: range by range equals the whole model exactly
    expect(out.vsWhole.probes).toBe(4);
    expect(out.vsWhole.maxDiff).toBe(0);
    expect(out.vsWhole.maxLogitDiff).toBe(0);
    const c = out.checks;
    expect(c.tampered).toMatch(/signature does not match/);
    expect(c.otherArtifact).toMatch(/made for artifact/);
    expect(c.otherPublisher).toMatch(/not by the publisher/);
    expect(c.garbage).toMatch(/not a reference file/);
    expect(out.noReference.code).toBe(1);
    expect(out.noReference.stderr).toMatch(/no probe reference for .*strata model certify/);
  });
});
