import { describe, expect, it } from "vitest";
import { judgeProbe } from "../../src/tracker/admission/probe.ts";

describe("admission probe", () => {
  it("judges a probe against the reference within the stated tolerance", () => {
    const ref = Float32Array.from([10, -20, 5]);
    expect(judgeProbe(ref, Float32Array.from([10, -20, 5.001]), 1e-4).ok).toBe(true);
    expect(judgeProbe(ref, Float32Array.from([10.5, -20, 5]), 1e-4).ok).toBe(false);
    expect(judgeProbe(ref, Float32Array.from([NaN, -20, 5]), 1e-4).ok).toBe(false);
    expect(judgeProbe(ref, Float32Array.from([10]), 1e-4).ok).toBe(false);
  });
});
