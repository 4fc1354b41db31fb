import { describe, expect, it } from "vitest";
import { certifyRanges, probePrompts } from "../../src/model/certify-plan.ts";

describe("certify plan", () => {
  // 10 MB a layer, plus 25 MB of embeddings in the first range and 30 MB of head in the last
  const need = (r: { start: number; end: number }) =>
    (r.end - r.start) * 10e6 + (r.start === 0 ? 25e6 : 0) + (r.end === 12 ? 30e6 : 0);

  it("covers every layer in order with the longest ranges under the cap", () => {
    expect(certifyRanges(12, need, 60e6)).toEqual([
      { start: 0, end: 3 },
      { start: 3, end: 9 },
      { start: 9, end: 12 },
    ]);
    expect(certifyRanges(12, need, 1e9)).toEqual([{ start: 0, end: 12 }]);
    for (const r of certifyRanges(12, need, 45e6)) expect(need(r)).toBeLessThanOrEqual(45e6);
  });

  it("refuses a cap under what one layer needs, naming both", () => {
    expect(() => certifyRanges(12, need, 30e6)).toThrow(
      /layer 0 alone needs 33\.4 MiB, more than the 28\.6 MiB cap/,
    );
  });

  it("probe prompts are fixed by the seed, differ between probes, stay in the vocabulary", () => {
    const a = probePrompts(49152, 4, 8, 42);
    expect(a).toEqual(probePrompts(49152, 4, 8, 42));
    expect(a).not.toEqual(probePrompts(49152, 4, 8, 43));
    expect(new Set(a.map((p) => p.join())).size).toBe(4);
    for (const p of a) for (const t of p) expect(t >= 256 && t < 49152).toBe(true);
    for (const t of probePrompts(300, 1, 64, 1)[0]) expect(t >= 0 && t < 300).toBe(true);
  });
});
