// The parity sweep (`strata bench parity`) without an engine: its cases are the whole sweep the
// suite's parity file used to run, their splits are what each model takes or refuses, and a case
// is held to what test/integration/parity-check.ts asserts of a report.
import { describe, expect, it } from "vitest";
import { parseSplit } from "../../src/engine/layer-range.ts";
import { cutRule } from "../../src/gguf/cut-points.ts";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { synthModel } from "../../src/model/synth.ts";
import { PARITY_SWEEP, sweepCases } from "../../checks/parity/sweep-cases.ts";
import { parityVerdict } from "../../checks/parity/verdict.ts";
import type { ParityReport } from "../../checks/parity/run.ts";

const shards = (split: string) => split.split(",").length;
const arch = (c: (typeof PARITY_SWEEP)[number]) => c.model.synth?.arch ?? c.model.name;

describe("the parity sweep's cases", () => {
  it("split both catalog models and every architecture of the suite's parity file in 2 and in 3 shards", () => {
    const models = [
      "smollm2",
      "gemma3-270m",
      "glm-dsa",
      "deepseek4",
      "llama",
      "qwen3",
      "qwen3moe",
      "gemma3",
      "deepseek2",
      "glm4moe",
      "deepseek32",
    ];
    for (const m of models) {
      const run = PARITY_SWEEP.filter((c) => arch(c) === m && !c.refused);
      expect(new Set(run.map((c) => shards(c.split))), m).toEqual(new Set([2, 3]));
    }
    expect(new Set(PARITY_SWEEP.map(arch))).toEqual(new Set(models));
    expect(PARITY_SWEEP.filter((c) => c.refused).map(arch)).toEqual(["glm-dsa", "deepseek4"]);
  });

  it("give splits each synthetic model takes, or refuses with the reason the case expects", () => {
    const rules = new Map<string, ReturnType<typeof cutRule>>();
    for (const c of PARITY_SWEEP.filter((x) => x.model.synth)) {
      if (!rules.has(c.model.name)) {
        rules.set(c.model.name, cutRule(parseGgufHeader(synthModel(c.model.synth!))));
      }
      const parse = () => parseSplit(c.split, 6, rules.get(c.model.name));
      if (c.refused) expect(parse, `${c.model.name} ${c.split}`).toThrow(c.refused);
      else expect(parse(), `${c.model.name} ${c.split}`).toHaveLength(shards(c.split));
    }
  });

  it("give the catalog models splits of all their layers (SmolLM2 30, Gemma 3 270M 18)", () => {
    const layers: Record<string, number> = { smollm2: 30, "gemma3-270m": 18 };
    for (const c of PARITY_SWEEP.filter((x) => !x.model.synth)) {
      expect(parseSplit(c.split, layers[c.model.name])).toHaveLength(shards(c.split));
    }
  });

  it("are picked by model, and an unknown model is refused with the ones there are", () => {
    expect(sweepCases(["glm-dsa"]).map((c) => c.split)).toEqual(["0:3,3:6", "0:1,1:4,4:6", "0:2,2:4,4:6"]);
    expect(sweepCases().length).toBe(PARITY_SWEEP.length);
    expect(() => sweepCases(["qwen9"])).toThrow(/no model qwen9 \(it has smollm2, gemma3-270m/);
  });
});

/** A report of 2 sessions × 3 steps through one seam that passes. */
function passing(): ParityReport {
  return {
    cross_engine: false,
    tokens_match: true,
    tokens_agree: true,
    first_mismatch: null,
    tokens_compared: 6,
    alone_divergences: [],
    max_abs_diff_hidden: [{ after_layer: 2, diff: 0, max_abs: 40, tolerance_rel: 0 }],
    hidden_within_tolerance: true,
    prompt_tokens: [5, 9],
    batched_match: true,
    batched: { agreements: [], near_ties: [], max_batch_sessions: 2 },
    release: {
      cells_expected: 7,
      cells_freed: [7, 7],
      others_cells_kept: true,
      others_after_release: [null],
    },
    kv_cells_used_after_alone: [0, 0],
    ok: true,
  } as unknown as ParityReport;
}

describe("a parity case's verdict", () => {
  const o = { seams: 1, tokens: 3, sessions: 2 };

  it("passes a report that holds everything the suite asserts", () => {
    expect(parityVerdict(passing(), o)).toEqual([]);
  });

  it("says what fails: tokens, steps compared, seams, batching, release, cells left", () => {
    const fails = (change: (p: Record<string, unknown>) => void, opts = o) => {
      const p = passing() as unknown as Record<string, unknown>;
      change(p);
      return parityVerdict(p as unknown as ParityReport, opts);
    };
    expect(fails((p) => p.tokens_compared = 5)).toEqual(["5 steps compared, not 6"]);
    expect(fails(() => {}, { ...o, seams: 2 })).toEqual(["1 seams compared, not 2"]);
    expect(fails((p) => p.prompt_tokens = [5, 5])).toEqual(["prompt lengths 5, 5 are not 2 different ones"]);
    expect(fails((p) => p.kv_cells_used_after_alone = [0, 3])).toEqual([
      "cells left after the sessions alone: 0, 3",
    ]);
    expect(fails((p) => (p.release as { cells_freed: number[] }).cells_freed = [7, 6])).toEqual([
      "release freed 7, 6 cells, not 7 each",
    ]);
    expect(fails((p) => (p.max_abs_diff_hidden as { diff: number }[])[0].diff = 1e-3)).toEqual([
      "after layer 2: |Δ| 0.001 over 0 of 40",
    ]);
    expect(fails((p) => p.ok = false)).toEqual(["the report is not ok"]);
  });

  it("lets another engine part from the whole model only at near-ties, counting the steps it cut", () => {
    const cross = (gapSigma: number, compared: number) => {
      const p = passing() as unknown as Record<string, unknown>;
      Object.assign(p, {
        cross_engine: true,
        tokens_match: false,
        alone_divergences: [{ session: 1, kind: "near_tie", step: 1, gapSigma }],
        tokens_compared: compared,
      });
      return parityVerdict(p as unknown as ParityReport, o);
    };
    // session 1 stopped after step 1 of 3: one step fewer
    expect(cross(0.1, 5)).toEqual([]);
    expect(cross(0.7, 5)).toEqual(["session 1 parts at a top-2 gap of 0.7 σ (under 0.5 σ allowed)"]);
    expect(cross(0.1, 6)).toEqual(["6 steps compared, not 5"]);
  });
});
