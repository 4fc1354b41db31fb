// Whole-model loads through the patched engine are llama.cpp's own: the same llama.h program
// built against the patched tree and against the pinned tree without the series writes the same
// logits, bit for bit, for every catalog model and a synthetic model of every architecture.
import { describe, expect, it } from "vitest";
import { strata } from "./strata.ts";

describe("strata upstream", () => {
  // two cold builds of the logits tool (patched, unpatched) before any model runs
  it("patched and unpatched builds give identical whole-model logits", { timeout: 1_500_000 }, async () => {
    const r = await strata(["upstream", "--json"]);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const { rows } = JSON.parse(r.stdout);
    const names = rows.map((x: { model: string }) => x.model);
    expect(names).toEqual(
      expect.arrayContaining([
        "synthetic gemma3",
        "synthetic deepseek2",
        "synthetic glm4moe",
        "synthetic deepseek4",
      ]),
    );
    expect(names).toEqual(expect.arrayContaining(["smollm2", "gemma3-270m"]));
    for (const row of rows) {
      expect(row.floats, row.model).toBeGreaterThan(0);
      expect(row.identical, JSON.stringify(row)).toBe(true);
    }
  });
});
