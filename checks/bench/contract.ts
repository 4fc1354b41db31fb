// The performance contract (checks/bench/contract.json) against one benchmark run.
import { join } from "node:path";
import { repoRoot } from "../../server/process/paths.ts";

export interface ContractCheck {
  readonly metric: string;
  readonly min?: number;
  readonly max?: number;
  readonly target: string;
}

export interface CheckResult extends ContractCheck {
  readonly value: number | undefined;
  readonly pass: boolean;
}

export async function loadContract(
  path = join(repoRoot, "checks", "bench", "contract.json"),
): Promise<ContractCheck[]> {
  return (JSON.parse(await Deno.readTextFile(path)) as { checks: ContractCheck[] }).checks;
}

/** Each check with the run's value; a metric the run lacks fails (it was not shown to hold). */
export function checkContract(run: unknown, checks: readonly ContractCheck[]): CheckResult[] {
  return checks.map((c) => {
    const v = c.metric.split(".").reduce<unknown>(
      (o, k) => (o && typeof o === "object" ? (o as Record<string, unknown>)[k] : undefined),
      run,
    );
    const value = typeof v === "number" && Number.isFinite(v) ? v : undefined;
    const pass = value !== undefined && (c.min === undefined || value >= c.min) &&
      (c.max === undefined || value <= c.max);
    return { ...c, value, pass };
  });
}

export function formatChecks(results: readonly CheckResult[]): string {
  return results.map((r) => {
    const bound = r.min !== undefined ? `≥ ${r.min}` : `≤ ${r.max}`;
    const value = r.value === undefined ? "not measured" : r.value.toFixed(3);
    return `${r.pass ? "PASS" : "FAIL"}  ${r.metric} = ${value} (${bound}): ${r.target}`;
  }).join("\n");
}
