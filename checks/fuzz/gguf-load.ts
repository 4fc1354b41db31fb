// The `gguf-load` target: whole GGUF files (header and tensor data) loaded by the C API
// (strata_model_load) in the AddressSanitizer build of the engine library
// (server/build/sanitizer.ts), then used a little and freed.
//
// An input is one byte choosing the layer range (byte % 5: the whole model, layers [0, 2),
// [2, end), [1, 2), or the vocabulary alone), then the file. The seeds are small synthetic
// qwen3 (q8_0, 6 layers) and gemma3 (f16, 4 layers) models (src/model/synth.ts, 100 and 137
// kB), the gguf-header target's architectures. Half of the changed inputs change the header
// alone and keep the tensor data after it (the header is where a loader trusts counts, sizes
// and offsets), the other half change anywhere in the file.
//
// The loads run in a child process (gguf-load-child.ts) started with the ASan runtime preloaded
// and ASAN_OPTIONS (sanitizer-build.ts), one file at a time over its stdin. The C API refusing
// the file is "refused", a load that succeeds is "accepted". When the child dies, its stderr is
// read: an AddressSanitizer report (exit 86) is thrown as a SanitizerReport (its first lines
// kept), any other death (SIGABRT from a failed GGML_ASSERT, SIGSEGV, ...) as an EngineCrash;
// either way a fresh child takes the next input. A load still running after HANG_MS is killed
// and thrown as an EngineHang (a failure, and a timeout).
import { join } from "node:path";
import { synthModel } from "../../src/model/synth.ts";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { DENO_V8_FLAGS } from "../../server/process/v8-flags.ts";
import { mutate } from "./mutate.ts";
import { EngineCrash, SanitizerReport } from "./fuzz.ts";
import type { FuzzRun, FuzzTarget } from "./target.ts";
import type { LoadReply, LoadRequest } from "./gguf-load-child.ts";

/** A load still running after this long is killed. */
export const HANG_MS = 20_000;

/** A load that never answered (killed after HANG_MS): a failure, not a refusal. */
export class EngineHang extends Error {}

const CHILD = new URL("./gguf-load-child.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

/** The layer range an input's first byte picks: [start, end) (end 0: through the last layer). */
export const RANGES: readonly { start: number; end: number; vocabOnly: number }[] = [
  { start: 0, end: 0, vocabOnly: 0 },
  { start: 0, end: 2, vocabOnly: 0 },
  { start: 2, end: 0, vocabOnly: 0 },
  { start: 1, end: 2, vocabOnly: 0 },
  { start: 0, end: 0, vocabOnly: 1 },
];

/** The seed files (without their range byte) and where each one's header ends. */
let models: { file: Uint8Array; headerSize: number }[] | undefined;
function seedModels() {
  models ??= [
    synthModel({ arch: "qwen3", nLayer: 6, nEmbd: 32, nFf: 64, weightType: "q8_0" }),
    synthModel({ arch: "gemma3", nLayer: 4, nEmbd: 32, nFf: 64, weightType: "f16" }),
  ].map((file) => ({ file, headerSize: parseGgufHeader(file, { fileSize: file.length }).headerSize }));
  return models;
}

const withRange = (range: number, file: Uint8Array) => {
  const out = new Uint8Array(1 + file.length);
  out[0] = range;
  out.set(file, 1);
  return out;
};

/** The first lines of an ASan report in a dead child's stderr, its signature, or undefined. */
export function parseAsanReport(stderr: string): { signature: string; report: string } | undefined {
  const lines = stderr.split("\n");
  const at = lines.findIndex((l) => /ERROR: AddressSanitizer: /.test(l));
  if (at < 0) return undefined;
  // the kind as the summary line names it (heap-buffer-overflow, SEGV, allocation-size-too-big, …)
  const summary = lines.find((l) => l.startsWith("SUMMARY: AddressSanitizer: "));
  const kind = summary?.slice("SUMMARY: AddressSanitizer: ".length).split(" ")[0] ??
    lines[at].replace(/^.*ERROR: AddressSanitizer: /, "").replace(/ on (unknown )?address.*$/, "").trim();
  const access = lines.slice(at + 1, at + 4).find((l) => /^(READ|WRITE) of size/.test(l))
    ?.replace(/ at 0x[0-9a-f]+.*$/, "") ?? "";
  // the first frame not in the sanitizer's own interceptors, as function and file:line; for a
  // lambda, the function it is in too
  const frames = lines.slice(at + 1).filter((l) =>
    /^\s+#\d+ 0x[0-9a-f]+ in /.test(l) && !/libsanitizer|__interceptor_|__asan_/.test(l)
  ).map((l) => l.replace(/^\s+#\d+ 0x[0-9a-f]+ in /, "").replace(/\/\S*\/(vendor\/llama\.cpp\/)/g, "$1"));
  const lambda = /^(operator\(\)|guarded<)/;
  const outer = lambda.test(frames[0] ?? "") ? frames.find((f) => !lambda.test(f))?.split(" ")[0] : undefined;
  const frame = (frames[0] ?? "(no frame)") + (outer ? ` in ${outer}` : "");
  const report = lines.slice(at, at + 40).filter((l) => l.trim() !== "");
  if (summary && !report.includes(summary)) report.push(summary);
  return {
    signature: `${kind}${access ? ` (${access})` : ""} @ ${frame}`.slice(0, 240),
    report: report.join("\n"),
  };
}

/** p's value, or undefined when ms passed first. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([p, new Promise<undefined>((r) => timer = setTimeout(() => r(undefined), ms))]);
  } finally {
    clearTimeout(timer);
  }
}

/** The child that loads the files: started with the ASan runtime, one request at a time. */
class EngineChild {
  private readonly proc: Deno.ChildProcess;
  private readonly writer: WritableStreamDefaultWriter<Uint8Array>;
  private readonly lines: ReadableStreamDefaultReader<string>;
  private pending = "";
  private stderr = "";
  private readonly stderrDone: Promise<void>;
  readonly exited: Promise<Deno.CommandStatus>;

  constructor(library: string, env: Record<string, string>) {
    this.proc = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--quiet", DENO_V8_FLAGS, "--config", CONFIG, CHILD, library],
      env,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.writer = this.proc.stdin.getWriter();
    this.lines = this.proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
    const stderr = this.proc.stderr;
    this.stderrDone = (async () => {
      for await (const s of stderr.pipeThrough(new TextDecoderStream())) {
        // a report is a few kB at the end (the runtime's warnings may come before it)
        this.stderr = (this.stderr + s).slice(-100_000);
      }
    })();
    this.exited = this.proc.status;
  }

  /** The next line the child prints, or undefined when it exited (or `ms` passed: "timeout"). */
  async nextLine(ms: number): Promise<string | undefined | "timeout"> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<"timeout">((r) => timer = setTimeout(() => r("timeout"), ms));
    try {
      for (;;) {
        const i = this.pending.indexOf("\n");
        if (i >= 0) {
          const line = this.pending.slice(0, i);
          this.pending = this.pending.slice(i + 1);
          return line;
        }
        const got = await Promise.race([this.lines.read(), timeout]);
        if (got === "timeout") return got;
        if (got.done) return undefined;
        this.pending += got.value;
      }
    } finally {
      clearTimeout(timer);
    }
  }

  async send(req: LoadRequest): Promise<void> {
    await this.writer.write(new TextEncoder().encode(JSON.stringify(req) + "\n"));
  }

  /** How it ended, and everything it printed on stderr. */
  async death(): Promise<{ exit: string; code: number; stderr: string }> {
    const s = await this.exited;
    // a process it forked may still hold the pipe: what came in 2 s is what there is
    await within(this.stderrDone, 2000);
    return { exit: s.signal ? `signal ${s.signal}` : `exit ${s.code}`, code: s.code, stderr: this.stderr };
  }

  kill(): void {
    try {
      this.proc.kill("SIGKILL");
    } catch { /* gone already */ }
  }

  async close(): Promise<void> {
    try {
      await this.writer.close();
    } catch { /* it died */ }
    if (await within(this.exited, 5000) === undefined) this.kill();
    await this.death();
  }
}

export interface GgufLoadOptions {
  /** tests only: every accepted load is followed by a call that overflows a buffer inside the
   *  library (strata_model_facts told a 2-element array holds 10), which ASan must report */
  readonly plant?: boolean;
}

/** The target; `ggufLoadTarget({ plant: true })` is the planted-bug variant the suite runs. */
export function ggufLoadTarget(o: GgufLoadOptions = {}): FuzzTarget {
  let library: string | undefined;
  let env: Record<string, string> | undefined;
  const prepare = async () => {
    if (library) return;
    const sb = await import("../../server/build/sanitizer.ts");
    library = await sb.ensureSanitizerLibrary();
    env = sb.asanEnv();
  };
  return {
    name: o.plant ? "gguf-load-planted" : "gguf-load",
    proto: false,
    sanitizer: "address",
    prepare,
    seeds() {
      const [qwen3, gemma3] = seedModels().map((m) => m.file);
      return Promise.resolve([
        withRange(0, qwen3),
        withRange(0, gemma3),
        withRange(2, qwen3),
        withRange(1, gemma3),
        withRange(3, qwen3),
        withRange(4, gemma3),
      ]);
    },
    change(seed, next) {
      // the header changed and the tensor data kept after it (the range byte now and then)
      const model = seedModels().find((m) => m.file.length === seed.length - 1);
      if (!model) return mutate(seed, [], next, false);
      const headers = seedModels().map((m) => m.file.subarray(0, m.headerSize));
      const header = mutate(seed.subarray(1, 1 + model.headerSize), headers, next, false);
      const out = new Uint8Array(1 + header.length + seed.length - 1 - model.headerSize);
      out[0] = next() % 8 === 0 ? next() % RANGES.length : seed[0];
      out.set(header, 1);
      out.set(seed.subarray(1 + model.headerSize), 1 + header.length);
      return out;
    },
    async start(): Promise<FuzzRun> {
      await prepare();
      const dir = Deno.makeTempDirSync({ prefix: "strata-fuzz-gguf-" });
      const path = join(dir, "input.gguf");
      let peak = 0;
      const fresh = async () => {
        const c = new EngineChild(library!, env!);
        const ready = await c.nextLine(60_000);
        if (typeof ready !== "string" || ready === "timeout" || !ready.startsWith('{"ready"')) {
          c.kill();
          const d = await c.death();
          throw new Error(`the ASan engine process did not start (${d.exit}):\n${d.stderr.slice(-2000)}`);
        }
        return c;
      };
      let child = await fresh();
      const run = async (input: Uint8Array) => {
        const range = RANGES[(input[0] ?? 0) % RANGES.length];
        Deno.writeFileSync(path, input.subarray(1));
        await child.send({ path, ...range, plant: o.plant });
        const line = await child.nextLine(HANG_MS);
        if (typeof line === "string" && line !== "timeout") {
          const reply = JSON.parse(line) as LoadReply;
          peak = Math.max(peak, reply.rssMb);
          if (!reply.ok) throw new Error(reply.error ?? "refused");
          return;
        }
        // it hung, or died: this input's finding, once a fresh child is up for the next one
        const dead = child;
        if (line === "timeout") dead.kill();
        const d = await dead.death();
        try {
          child = await fresh();
        } catch (e) {
          throw new EngineCrash("no fresh engine process", e instanceof Error ? e.message : String(e));
        }
        if (line === "timeout") throw new EngineHang(`no answer in ${HANG_MS / 1000} s: killed`);
        const asan = parseAsanReport(d.stderr);
        if (asan) throw new SanitizerReport(asan.signature, asan.report);
        // its first lines (a sanitizer's own CHECK failure, ggml's GGML_ASSERT message) and last
        const err = d.stderr.trim().split("\n");
        throw new EngineCrash(
          d.exit,
          (err.length > 24 ? [...err.slice(0, 8), "…", ...err.slice(-14)] : err).join("\n"),
        );
      };
      return Object.assign(run, {
        close: async () => {
          await child.close();
          Deno.removeSync(dir, { recursive: true });
        },
        peakRssMb: () => peak,
      });
    },
  };
}

export const ggufLoad: FuzzTarget = ggufLoadTarget();
