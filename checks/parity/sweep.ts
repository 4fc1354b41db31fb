// `strata bench parity`: the parity sweep, case after case through what `strata parity` runs
// (each shard in its own process against whole-model llama.cpp), each case's figures and
// verdict. A correctness sweep: it goes on past a failing case, and says which failed.
import { join } from "node:path";
import { synthModel } from "../../src/model/synth.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { resolveModel } from "../../server/model/fetch.ts";
import { openParityModel } from "./parity-model.ts";
import { type ParityReport, runParity } from "./run.ts";
import { type SweepCase, sweepCases } from "./sweep-cases.ts";
import { parityVerdict } from "./verdict.ts";

export interface SweepOptions {
  readonly backend: NativeBackend;
  readonly tokens: number;
  readonly sessions: number;
  readonly threads: number;
  /** only the cases of these models (catalog names or synthetic architectures) */
  readonly only?: readonly string[];
  readonly progress?: (what: string) => void;
  /** each case's result, as it comes */
  readonly onCase?: (r: SweepResult) => void;
}

/** What the suite's parity file ran each case with (test/integration/parity-check.ts). */
export const SWEEP_DEFAULTS = { tokens: 32, sessions: 4, threads: 2 } as const;

export interface SweepResult {
  readonly model: string;
  readonly split: string;
  readonly prompt_tokens_min: number;
  readonly expected: "parity" | "refused";
  readonly pass: boolean;
  /** what failed, in words (empty when it passed) */
  readonly failures: string[];
  /** a refused split's reason */
  readonly refusal?: string;
  readonly seconds: number;
  /** `strata parity --json`'s report of the case */
  readonly report?: ParityReport;
}

export async function paritySweep(o: SweepOptions) {
  const say = o.progress ?? (() => {});
  const cases = sweepCases(o.only);
  const started = performance.now();
  const dir = await Deno.makeTempDir({ prefix: "strata-parity-sweep-" });
  const models = new Map<string, Promise<SweepModelFile>>();
  const results: SweepResult[] = [];
  try {
    for (const [i, c] of cases.entries()) {
      say(`parity ${i + 1}/${cases.length}: ${c.model.name} ${c.split}`);
      if (!models.has(c.model.name)) models.set(c.model.name, modelFile(c, dir));
      const r = await models.get(c.model.name)!.then(
        (model) => sweepCase(c, model, o),
        // a model that could not be fetched or written fails its cases; the sweep goes on
        (e) => failed(c, [`no model: ${message(e)}`], 0),
      );
      o.onCase?.(r);
      results.push(r);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  const passed = results.filter((r) => r.pass).length;
  return {
    backend: `native-${o.backend}`,
    tokens: o.tokens,
    sessions: o.sessions,
    threads: o.threads,
    cases: results,
    passed,
    failed: results.length - passed,
    ok: passed === results.length,
    seconds: (performance.now() - started) / 1000,
  };
}

export type SweepReport = Awaited<ReturnType<typeof paritySweep>>;

interface SweepModelFile {
  readonly path: string;
  readonly name: string;
}

/** A catalog model fetched, or a synthetic one written into dir. */
async function modelFile(c: SweepCase, dir: string): Promise<SweepModelFile> {
  if (!c.model.synth) return await resolveModel(c.model.name);
  const path = join(dir, `${c.model.name.replace(/[^a-z0-9-]+/gi, "-")}.gguf`);
  await Deno.writeFile(path, synthModel(c.model.synth));
  return { path, name: c.model.name };
}

const message = (e: unknown) => e instanceof Error ? e.message : String(e);

const caseRow = (c: SweepCase) => ({
  model: c.model.name,
  split: c.split,
  prompt_tokens_min: c.promptTokens ?? 0,
  expected: c.refused ? "refused" as const : "parity" as const,
});

const failed = (c: SweepCase, failures: string[], seconds: number): SweepResult => ({
  ...caseRow(c),
  pass: false,
  failures,
  seconds,
});

async function sweepCase(c: SweepCase, model: SweepModelFile, o: SweepOptions): Promise<SweepResult> {
  const started = performance.now();
  const seconds = () => (performance.now() - started) / 1000;
  let opened;
  try {
    opened = await openParityModel(model.path, c.split, c.promptTokens ?? 0);
  } catch (e) {
    const why = message(e);
    if (c.refused === undefined) return failed(c, [why], seconds());
    if (!why.includes(c.refused)) {
      return failed(c, [`refused, but not saying "${c.refused}": ${why}`], seconds());
    }
    return { ...caseRow(c), pass: true, failures: [], refusal: why, seconds: seconds() };
  }
  const { tokenizer, prompts, split } = opened;
  try {
    if (c.refused) return failed(c, ["the split was not refused"], seconds());
    const report = await runParity({
      modelPath: model.path,
      modelName: model.name,
      split,
      backend: o.backend,
      tokens: o.tokens,
      sessions: o.sessions,
      threads: o.threads,
      tokenizer,
      prompts,
    });
    const failures = parityVerdict(report, {
      seams: split.length - 1,
      tokens: o.tokens,
      sessions: o.sessions,
    });
    if (c.seamWidth !== undefined && report.seam_width !== c.seamWidth) {
      failures.push(`seam width ${report.seam_width}, not ${c.seamWidth}`);
    }
    if (c.text !== undefined && !report.text?.includes(c.text)) {
      failures.push(`route output ${JSON.stringify(report.text)} lacks "${c.text}"`);
    }
    return { ...caseRow(c), pass: failures.length === 0, failures, seconds: seconds(), report };
  } catch (e) {
    // an engine that died is this case's failure; the sweep goes on
    return failed(c, [message(e)], seconds());
  } finally {
    tokenizer.close();
  }
}

const e2 = (x: number) => x.toExponential(2);

/** One line: the verdict, the case and its figures (or what failed). */
export function printSweepResult(r: SweepResult): string {
  const head = `${r.pass ? "PASS" : "FAIL"}  ${r.model} ${r.split}` +
    (r.prompt_tokens_min ? ` (prompts ${r.prompt_tokens_min}+ tokens)` : "");
  const p = r.report;
  const figures = r.expected === "refused" && r.pass
    ? `refused: ${r.refusal}`
    : p
    ? `${p.arch}, ${p.engine_backends.join(",")}; greedy ${p.tokens_compared} steps ${
      p.tokens_match ? "identical" : p.tokens_agree ? "identical to near-ties" : "MISMATCH"
    }; seams |Δ| ${p.max_abs_diff_hidden.map((s) => e2(s.diff)).join(", ")}; logits |Δ| ${
      e2(p.max_abs_diff_logits)
    }; batched ${
      p.batched_match ? "match" : "MISMATCH"
    } (up to ${p.batched.max_batch_tokens} tokens); release ${p.release_ok ? "exact" : "WRONG"}`
    : "did not run";
  const what = r.failures.length ? `; failed: ${r.failures.join("; ")}` : "";
  return `${head}: ${figures}${what} (${r.seconds.toFixed(1)} s)`;
}

/** The sweep's last line: how many cases passed. */
export function sweepSummary(s: SweepReport): string {
  return `parity sweep on ${s.backend}, ${s.sessions} sessions × ${s.tokens} steps a case: ` +
    `${s.passed} of ${s.cases.length} cases pass in ${s.seconds.toFixed(0)} s`;
}
