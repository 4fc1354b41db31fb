// The parent's handle on a shard process: one request at a time, replies in order.
import { DENO_V8_FLAGS } from "../../server/process/v8-flags.ts";
import { describeExit } from "../../server/process/exit.ts";
import { EngineError, type EngineErrorCode } from "../../src/engine/errors.ts";
import type { EngineMemory, ModelFacts, SeqId } from "../../src/engine/range-engine.ts";
import { encodeFrame, type Frame, readFrames, splitPayload } from "./frames.ts";
import { type EngineHost, type EngineHostLoad, type EngineHostStep, hostLabel } from "./engine-host.ts";

export type { EngineHostLoad, EngineHostStep } from "./engine-host.ts";

export class EngineProcess implements EngineHost {
  facts!: ModelFacts;
  engineBackend = "";
  rssAfterLoad = 0;
  label = "shard";
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #frames: AsyncGenerator<Frame>;
  #busy: Promise<unknown> = Promise.resolve();

  private constructor(env: Record<string, string>) {
    const script = new URL("./engine-process-main.ts", import.meta.url).pathname;
    this.#child = new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", "--quiet", DENO_V8_FLAGS, script],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
      env,
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    this.#frames = readFrames(this.#child.stdout);
  }

  static async spawn(load: EngineHostLoad, env: Record<string, string> = {}): Promise<EngineProcess> {
    const p = new EngineProcess(env);
    p.label = hostLabel(load.range);
    const spec = load.range === "whole"
      ? { ...load, range: undefined }
      : { ...load, range: undefined, start: load.range.start, end: load.range.end };
    const r = await p.request({ op: "load", spec, backend: load.backend, capture: load.capture ?? false });
    p.facts = r.header.facts as ModelFacts;
    p.engineBackend = String(r.header.engineBackend);
    p.rssAfterLoad = Number(r.header.rss);
    return p;
  }

  /** A shard process with nothing loaded: the runtime's own memory, for baselines. */
  static bare(env: Record<string, string> = {}): EngineProcess {
    return new EngineProcess(env);
  }

  get pid(): number {
    return this.#child.pid;
  }

  async open(): Promise<SeqId> {
    return (await this.request({ op: "open" })).header.seq as SeqId;
  }

  async decode(
    input: Int32Array | Float32Array,
    pos: Int32Array,
    seq: Int32Array,
    outputs: Uint8Array,
    capture: number[] = [],
  ): Promise<EngineHostStep> {
    const r = await this.request({ op: "decode", n: seq.length, capture }, [input, pos, seq, outputs]);
    const h = r.header as { rows: number; dim: number; captured: number[] };
    const parts = splitPayload(r.payload, [
      ["f32", h.rows * h.dim],
      ...h.captured.map((n) => ["f32", n] as ["f32", number]),
    ]);
    return {
      rows: h.rows,
      dim: h.dim,
      data: parts[0] as Float32Array,
      captured: parts.slice(1) as Float32Array[],
    };
  }

  /**
   * One step with greedy picks made in the shard process: the token of each output row and the
   * step's time there (engine and picks, without the pipe to this process).
   */
  async decodeGreedy(
    input: Int32Array | Float32Array,
    pos: Int32Array,
    seq: Int32Array,
    outputs: Uint8Array,
  ): Promise<{ tokens: number[]; ms: number }> {
    const r = await this.request({ op: "decode", n: seq.length, greedy: true }, [input, pos, seq, outputs]);
    const h = r.header as { tokens: number[]; ms: number };
    return { tokens: h.tokens, ms: h.ms };
  }

  async release(seq: SeqId): Promise<EngineMemory> {
    return (await this.request({ op: "release", seq })).header.memory as EngineMemory;
  }

  async memory(): Promise<{ memory: EngineMemory; rss: number }> {
    const h = (await this.request({ op: "memory" })).header;
    return { memory: h.memory as EngineMemory, rss: Number(h.rss) };
  }

  async close(): Promise<void> {
    try {
      await this.request({ op: "quit" });
    } catch { /* already gone */ }
    await this.#child.status;
  }

  kill(): void {
    try {
      this.#child.kill("SIGKILL");
    } catch { /* exited */ }
  }

  request(header: Record<string, unknown>, parts: ArrayBufferView[] = []): Promise<Frame> {
    const run = this.#busy.then(async () => {
      await this.#writer.write(encodeFrame(header, parts));
      const next = await this.#frames.next();
      if (next.done) {
        const st = await this.#child.status;
        throw new EngineError(
          "engine_failed",
          `${this.label} (process ${this.pid}) exited (${describeExit(st)})`,
        );
      }
      const err = next.value.header.error as { code: EngineErrorCode; message: string } | undefined;
      if (err) throw new EngineError(err.code, err.message);
      return next.value;
    });
    this.#busy = run.catch(() => {});
    return run;
  }
}
