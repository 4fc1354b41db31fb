// One fuzz target run in this process: seeded inputs, each classed as accepted, refused (a
// clear error of ours: SeamError, GgufError, TrackerError, ApiError or a plain Error thrown on
// purpose), a failure (anything else: a TypeError, RangeError or other error the runtime
// raised, i.e. a path the checks missed), or a timeout (over a second). Failures are told
// apart by their kind, message (numbers masked) and the first frame of ours in the stack.
// A target whose code runs in a sanitizer build of the engine (gguf-load) has two more
// outcomes, thrown by its run: a SanitizerReport (the engine process died with an
// AddressSanitizer report; told apart by the error's kind, access and first frame) and an
// EngineCrash (it died otherwise, e.g. SIGABRT from a failed GGML_ASSERT).
import { mutate, prng } from "./mutate.ts";
import type { FuzzTarget } from "./target.ts";

/** An input slower than this is a timeout. */
export const TIMEOUT_MS = 1000;

export interface Failure {
  readonly signature: string;
  readonly count: number;
  /** the first input that raised it, base64 (kept as a regression once fixed) */
  readonly input: string;
}

/** A sanitizer's report on one input: the engine process died with it. */
export class SanitizerReport extends Error {
  /** signature: the error's kind, the access, the first frame outside the sanitizer;
   *  report: the report's first lines as printed */
  constructor(readonly signature: string, readonly report: string) {
    super(`AddressSanitizer: ${signature}`);
  }
}

/** The engine process died on an input without a sanitizer report (a signal, an abort). */
export class EngineCrash extends Error {
  constructor(readonly exit: string, readonly stderr: string) {
    super(`engine process died (${exit})`);
  }
}

export interface SanitizerFinding extends Failure {
  /** the report's first lines */
  readonly report: string;
}

export interface EngineCrashFinding {
  readonly exit: string;
  readonly stderr: string;
  readonly input: string;
}

export interface TargetReport {
  readonly target: string;
  readonly seed: number;
  readonly inputs: number;
  readonly accepted: number;
  readonly refused: number;
  readonly failures: number;
  readonly distinct_failures: Failure[];
  /** inputs on which the sanitizer reported (0 for a target without one) */
  readonly sanitizer_reports: number;
  readonly distinct_sanitizer_reports: SanitizerFinding[];
  /** inputs on which the engine process died otherwise (the first 10 kept) */
  readonly engine_crashes: number;
  readonly engine_crashed: EngineCrashFinding[];
  readonly timeouts: number;
  readonly slowest_ms: number;
  readonly regressions_replayed: number;
  readonly peak_rss_mb: number;
  readonly seconds: number;
}

/** A refusal is an error our code raised on purpose; anything else got past the checks. */
export function isRefusal(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  const kind = e.constructor.name;
  return kind === "Error" || kind === "SeamError" || kind === "GgufError" || kind === "GgufNeedMoreBytes" ||
    kind === "TrackerError" || kind === "ApiError" || kind === "ManifestError" || kind === "DownloadError";
}

function signature(e: unknown): string {
  if (!(e instanceof Error)) return `thrown ${typeof e}: ${String(e).slice(0, 80)}`;
  const frame = (e.stack ?? "").split("\n").find((l) => /\/(src|server|checks)\//.test(l))?.trim() ?? "";
  const at = frame.replace(/^at /, "").replace(/^.*\/((src|server|checks)\/[^):]+:\d+).*$/, "$1");
  return `${e.constructor.name}: ${e.message.replace(/\d+/g, "N").slice(0, 120)} @ ${at}`;
}

const toBase64 = (b: Uint8Array) => btoa(Array.from(b, (x) => String.fromCharCode(x)).join(""));

/** Peak resident memory of this process (Linux), in MB; 0 where it cannot be read. */
function peakRssMb(): number {
  try {
    const m = Deno.readTextFileSync("/proc/self/status").match(/VmHWM:\s+(\d+) kB/);
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

export async function fuzzTarget(
  target: FuzzTarget,
  o: { seed: number; seconds?: number; inputs?: number; regressions?: readonly Uint8Array[] },
): Promise<TargetReport> {
  const seeds = await target.seeds();
  let run = await target.start();
  const next = prng(o.seed);
  const failures = new Map<string, { count: number; input: string }>();
  const reports = new Map<string, { count: number; input: string; report: string }>();
  const engineCrashed: EngineCrashFinding[] = [];
  let inputs = 0, accepted = 0, refused = 0, failed = 0, timeouts = 0, slowest = 0;
  let sanitized = 0, engineCrashes = 0, childPeak = 0;
  const t0 = performance.now();
  const until = o.seconds !== undefined ? t0 + o.seconds * 1000 : Infinity;
  const limit = o.inputs ?? Infinity;
  const regressions = o.regressions ?? [];
  // half the time a change that knows the structure, where the target has one; then, half
  // the time, the checksums made right again
  const changed = (seed: Uint8Array) => {
    const b = target.change && next() % 2
      ? target.change(seed, next)
      : mutate(seed, seeds, next, target.proto);
    return target.fixup && next() % 2 ? target.fixup(b) : b;
  };
  for (let i = 0; i < regressions.length + limit && performance.now() < until; i++) {
    // the kept inputs first, then the seeds as they are, then changed copies
    const input = i < regressions.length
      ? regressions[i]
      : i - regressions.length < seeds.length
      ? seeds[i - regressions.length]
      : changed(seeds[next() % seeds.length]);
    const at = performance.now();
    try {
      await run(input);
      accepted++;
    } catch (e) {
      if (e instanceof SanitizerReport) {
        sanitized++;
        const r = reports.get(e.signature);
        if (r) r.count++;
        else reports.set(e.signature, { count: 1, input: toBase64(input), report: e.report });
      } else if (e instanceof EngineCrash) {
        engineCrashes++;
        if (engineCrashed.length < 10) {
          engineCrashed.push({ exit: e.exit, stderr: e.stderr, input: toBase64(input) });
        }
      } else if (isRefusal(e)) refused++;
      else {
        failed++;
        const s = signature(e);
        const f = failures.get(s);
        if (f) f.count++;
        else failures.set(s, { count: 1, input: toBase64(input) });
      }
    }
    const ms = performance.now() - at;
    slowest = Math.max(slowest, ms);
    if (ms > TIMEOUT_MS) timeouts++;
    inputs++;
    // state kept between inputs (a tracker's registrations) starts afresh now and then
    if (inputs % 5000 === 0) {
      childPeak = Math.max(childPeak, run.peakRssMb?.() ?? 0);
      await run.close?.();
      run = await target.start();
    }
  }
  childPeak = Math.max(childPeak, run.peakRssMb?.() ?? 0);
  await run.close?.();
  return {
    target: target.name,
    seed: o.seed,
    inputs,
    accepted,
    refused,
    failures: failed,
    distinct_failures: [...failures].map(([signature, f]) => ({ signature, ...f })),
    sanitizer_reports: sanitized,
    distinct_sanitizer_reports: [...reports].map(([signature, r]) => ({ signature, ...r })),
    engine_crashes: engineCrashes,
    engine_crashed: engineCrashed,
    timeouts,
    slowest_ms: Math.round(slowest * 10) / 10,
    regressions_replayed: Math.min(regressions.length, inputs),
    // this process's, or the engine process's where the target runs one (the larger)
    peak_rss_mb: Math.round(Math.max(peakRssMb(), childPeak)),
    seconds: Math.round((performance.now() - t0) / 100) / 10,
  };
}
