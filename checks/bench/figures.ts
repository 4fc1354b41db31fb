// The figures every benchmarked system reports, the same way: one session, a prompt, then
// greedy decode steps timed one by one.
import { quantile } from "./route-throughput.ts";

export interface EngineFigures {
  /** prompt sent → first token back */
  readonly ttft_ms: number;
  readonly prefill_tps: number;
  readonly decode_tps: number;
  /** inter-token latency */
  readonly p50_ms: number;
  readonly p95_ms: number;
  /** resident memory of every process the system runs, summed */
  readonly rss_mb: number;
}

export function figures(
  promptTokens: number,
  ttftMs: number,
  stepMs: number[],
  rssBytes: number,
): EngineFigures {
  return {
    ttft_ms: ttftMs,
    prefill_tps: promptTokens / (ttftMs / 1000),
    decode_tps: decodeTps(stepMs),
    p50_ms: quantile(stepMs, 0.5),
    p95_ms: quantile(stepMs, 0.95),
    rss_mb: rssBytes / 2 ** 20,
  };
}

/** Decode tokens per second of steps timed one by one. */
export const decodeTps = (stepMs: number[]) => stepMs.length / (stepMs.reduce((a, b) => a + b, 0) / 1000);

/** A process's resident set (Linux), 0 when it is gone. */
export const rssOf = (pid: number) => statusBytes(pid, "VmRSS");

/** A memory figure of /proc/<pid>/status ("VmRSS", "VmHWM"), in bytes; 0 when the process is gone. */
export async function statusBytes(pid: number, field: string): Promise<number> {
  try {
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}
