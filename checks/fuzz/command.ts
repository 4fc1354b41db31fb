// `strata fuzz`: every target (or those named) for `seconds` each, in processes of their own,
// as many at once as there are cores. A process that dies without its report is a crash; its
// target starts again with the next seed for the time left. A target under a sanitizer
// (gguf-load) gets its sanitizer build first, before any clock starts; its engine process's
// reports are counted per input (sanitizer_reports, and the distinct ones with their first
// lines), and its engine deaths without a report are crashes too.
import { availableParallelism } from "node:os";
import { DENO_V8_FLAGS } from "../../server/process/v8-flags.ts";
import type { TargetReport } from "./fuzz.ts";
import { TARGETS } from "./targets.ts";

export interface FuzzRun {
  readonly target: string;
  readonly reports: TargetReport[];
  readonly crashes: { readonly seed: number; readonly exit: string; readonly stderr: string }[];
}

export interface FuzzSummary {
  readonly target: string;
  readonly inputs: number;
  readonly accepted: number;
  readonly refused: number;
  readonly failures: number;
  readonly distinct_failures: number;
  readonly crashes: number;
  readonly timeouts: number;
  readonly slowest_ms: number;
  readonly peak_rss_mb: number;
  readonly seconds: number;
  /** the sanitizer the target's engine runs under, null for none */
  readonly sanitizer: string | null;
  readonly sanitizer_reports: number;
  readonly distinct_sanitizer_reports: number;
  readonly found: TargetReport["distinct_failures"];
  readonly sanitizer_found: TargetReport["distinct_sanitizer_reports"];
  readonly crashed: (FuzzRun["crashes"][number] | TargetReport["engine_crashed"][number])[];
}

async function runTarget(target: string, seconds: number, seed: number): Promise<FuzzRun> {
  const run: FuzzRun = { target, reports: [], crashes: [] };
  const until = performance.now() + seconds * 1000;
  for (let s = seed; performance.now() < until - 1000; s++) {
    const left = Math.max(1, Math.round((until - performance.now()) / 1000));
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--quiet",
        DENO_V8_FLAGS,
        "--config",
        new URL("../../deno.json", import.meta.url).pathname,
        new URL("./worker.ts", import.meta.url).pathname,
        target,
        String(left),
        String(s),
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const line = new TextDecoder().decode(out.stdout).trim().split("\n").pop() ?? "";
    if (out.success && line.startsWith("{")) {
      run.reports.push(JSON.parse(line));
      break;
    }
    run.crashes.push({
      seed: s,
      exit: out.signal ? `signal ${out.signal}` : `exit ${out.code}`,
      stderr: new TextDecoder().decode(out.stderr).slice(-600),
    });
  }
  return run;
}

export async function fuzzAll(
  o: { seconds: number; seed: number; targets?: string[] },
): Promise<FuzzSummary[]> {
  const names = o.targets?.length ? o.targets : TARGETS.map((t) => t.name);
  for (const n of names) {
    if (!TARGETS.some((t) => t.name === n)) {
      throw new Error(`no fuzz target ${n} (there are ${TARGETS.map((t) => t.name).join(", ")})`);
    }
  }
  // a sanitizer build is made here, on first use, with its progress on this terminal
  for (const t of TARGETS) if (names.includes(t.name)) await t.prepare?.();
  const queue = [...names];
  const runs: FuzzRun[] = [];
  await Promise.all(
    Array.from({ length: Math.min(queue.length, availableParallelism()) }, async () => {
      for (let n = queue.shift(); n; n = queue.shift()) runs.push(await runTarget(n, o.seconds, o.seed));
    }),
  );
  return names.map((n) => summarize(runs.find((r) => r.target === n)!));
}

function summarize(r: FuzzRun): FuzzSummary {
  const reports = new Map<string, TargetReport["distinct_sanitizer_reports"][number]>();
  for (const x of r.reports) {
    for (const f of x.distinct_sanitizer_reports) {
      const had = reports.get(f.signature);
      reports.set(f.signature, had ? { ...had, count: had.count + f.count } : f);
    }
  }
  const sum = (f: (x: TargetReport) => number) => r.reports.reduce((n, x) => n + f(x), 0);
  const found = new Map<string, TargetReport["distinct_failures"][number]>();
  for (const x of r.reports) for (const f of x.distinct_failures) found.set(f.signature, f);
  return {
    target: r.target,
    inputs: sum((x) => x.inputs),
    accepted: sum((x) => x.accepted),
    refused: sum((x) => x.refused),
    failures: sum((x) => x.failures),
    distinct_failures: found.size,
    crashes: r.crashes.length + sum((x) => x.engine_crashes),
    timeouts: sum((x) => x.timeouts),
    slowest_ms: Math.max(0, ...r.reports.map((x) => x.slowest_ms)),
    peak_rss_mb: Math.max(0, ...r.reports.map((x) => x.peak_rss_mb)),
    seconds: sum((x) => x.seconds),
    sanitizer: TARGETS.find((t) => t.name === r.target)?.sanitizer ?? null,
    sanitizer_reports: sum((x) => x.sanitizer_reports),
    distinct_sanitizer_reports: reports.size,
    found: [...found.values()],
    sanitizer_found: [...reports.values()],
    crashed: [...r.crashes, ...r.reports.flatMap((x) => x.engine_crashed)],
  };
}

export function printFuzz(rows: readonly FuzzSummary[]): string {
  return [
    "target            inputs      refused   failures (distinct)  crashes  timeouts  slowest   peak RSS  sanitizer reports",
    ...rows.map((r) =>
      `${r.target.padEnd(16)} ${String(r.inputs).padStart(9)} ${String(r.refused).padStart(10)}   ${
        `${r.failures} (${r.distinct_failures})`.padEnd(20)
      } ${String(r.crashes).padStart(6)} ${String(r.timeouts).padStart(9)} ${
        `${r.slowest_ms} ms`.padStart(9)
      } ${`${r.peak_rss_mb} MB`.padStart(9)}  ${
        r.sanitizer ? `${r.sanitizer_reports} (${r.distinct_sanitizer_reports}, ${r.sanitizer})` : "-"
      }`
    ),
    ...rows.flatMap((r) => [
      ...r.found.map((f) =>
        `  ${r.target}: ${f.count} × ${f.signature}\n    input (base64): ${f.input.slice(0, 200)}`
      ),
      ...r.sanitizer_found.map((f) =>
        `  ${r.target}: ${f.count} × AddressSanitizer: ${f.signature}\n${
          f.report.split("\n").slice(0, 12).map((l) => `    ${l}`).join("\n")
        }\n    input (base64): ${f.input.slice(0, 200)}`
      ),
      ...r.crashed.map((c) =>
        `  ${r.target}: crashed (${c.exit})${"seed" in c ? ` at seed ${c.seed}` : ""}: ${
          c.stderr.trim().split("\n").pop()
        }`
      ),
    ]),
  ].join("\n");
}
