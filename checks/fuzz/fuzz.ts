// One fuzz target run in this process: seeded inputs, each classed as accepted, refused (a
// clear error of ours: SeamError, GgufError, TrackerError, ApiError or a plain Error thrown on
// purpose), a failure (anything else: a TypeError, RangeError or other error the runtime
// raised, i.e. a path the checks missed), or a timeout (over a second). Failures are told
// apart by their kind, message (numbers masked) and the first frame of ours in the stack.
import { mutate, prng } from "./mutate.ts";
import type { FuzzTarget } from "./targets.ts";

/** An input slower than this is a timeout. */
export const TIMEOUT_MS = 1000;

export interface Failure {
  readonly signature: string;
  readonly count: number;
  /** the first input that raised it, base64 (kept as a regression once fixed) */
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
    kind === "TrackerError" || kind === "ApiError";
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
  let inputs = 0, accepted = 0, refused = 0, failed = 0, timeouts = 0, slowest = 0;
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
      if (isRefusal(e)) refused++;
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
    if (inputs % 5000 === 0) run = await target.start();
  }
  return {
    target: target.name,
    seed: o.seed,
    inputs,
    accepted,
    refused,
    failures: failed,
    distinct_failures: [...failures].map(([signature, f]) => ({ signature, ...f })),
    timeouts,
    slowest_ms: Math.round(slowest * 10) / 10,
    regressions_replayed: Math.min(regressions.length, inputs),
    peak_rss_mb: Math.round(peakRssMb()),
    seconds: Math.round((performance.now() - t0) / 100) / 10,
  };
}
