// RangeEngine on the native library through Deno FFI.
import { existsSync } from "node:fs";
import { EngineError, type EngineErrorCode } from "../../../src/engine/errors.ts";
import { layerRange } from "../../../src/engine/layer-range.ts";
import {
  contextFlags,
  type DecodeBatch,
  type DecodeOutputs,
  type EngineMemory,
  type ModelFacts,
  type RangeEngine,
  type SeqId,
  type ShardSpec,
} from "../../../src/engine/range-engine.ts";
import { SequenceTable } from "../../../src/engine/sequences.ts";
import { EngineQueue } from "../../../src/engine/engine-queue.ts";
import { ensureNativeLibrary, type NativeBackend } from "./build.ts";
import { cstr, ErrorBuffer, handleError, openStrata, readString, type StrataLib } from "./ffi.ts";

const CODE: Record<number, EngineErrorCode> = { [-1]: "bad_input", [-2]: "kv_full", [-3]: "engine_failed" };

function loadError(message: string): EngineError {
  if (message.startsWith("unsupported architecture")) return new EngineError("unsupported_arch", message);
  if (message.startsWith("invalid layer range")) return new EngineError("bad_range", message);
  return new EngineError("load_failed", message);
}

/** Loads a model (a range, the whole, or vocab only) and returns its handle. */
export async function loadModel(
  lib: StrataLib,
  path: string,
  range: ShardSpec["range"],
  gpuLayers: number,
  vocabOnly: boolean,
): Promise<Deno.PointerObject> {
  if (!existsSync(path)) throw new EngineError("load_failed", `no model file at ${path}`);
  const [start, end] = range === "whole" ? [0, 0] : [range.start, range.end];
  const err = new ErrorBuffer();
  const handle = await lib.strata_model_load(
    cstr(path),
    start,
    end,
    gpuLayers,
    vocabOnly ? 1 : 0,
    err.buf,
    err.cap,
  );
  if (!handle) throw loadError(err.message);
  return handle;
}

export function modelFacts(lib: StrataLib, model: Deno.PointerObject): ModelFacts {
  const f = new BigInt64Array(10);
  lib.strata_model_facts(model, f, 10);
  const n = (i: number) => Number(f[i]);
  return {
    arch: readString((b, c) => lib.strata_model_arch(model, b, c)),
    nLayer: n(0),
    nEmbd: n(1),
    nVocab: n(2),
    nCtxTrain: n(3),
    range: layerRange(n(4), n(5), n(0)),
    nHead: n(6),
    nHeadKv: n(7),
    weightBytes: n(8),
    nExpert: n(9),
  };
}

export class NativeEngine implements RangeEngine {
  readonly kind = "native" as const;
  readonly input: "tokens" | "hidden";
  readonly output: "logits" | "hidden";
  readonly #seqs: SequenceTable;
  readonly #calls = new EngineQueue();

  private constructor(
    private readonly lib: StrataLib,
    private readonly model: Deno.PointerObject,
    private readonly ctx: Deno.PointerObject,
    readonly backend: string,
    readonly facts: ModelFacts,
    private readonly spec: ShardSpec,
  ) {
    this.input = facts.range.start === 0 ? "tokens" : "hidden";
    this.output = facts.range.end === facts.nLayer ? "logits" : "hidden";
    this.#seqs = new SequenceTable(spec.maxSequences);
  }

  /** capture: record residual streams for reference comparisons (slower; whole-model runs). */
  static async load(
    spec: ShardSpec,
    backend: NativeBackend = "cpu",
    opts: { capture?: boolean } = {},
  ): Promise<NativeEngine> {
    const lib = openStrata(await ensureNativeLibrary(backend));
    const gpuLayers = spec.gpuLayers ?? (backend === "cpu" ? 0 : 999);
    const model = await loadModel(lib, spec.modelPath, spec.range, gpuLayers, false);
    const facts = modelFacts(lib, model);
    const err = new ErrorBuffer();
    const ctx = await lib.strata_ctx_new(
      model,
      spec.kvCells,
      spec.maxSequences,
      spec.batchTokens,
      spec.threads,
      contextFlags(spec, opts.capture),
      err.buf,
      err.cap,
    );
    if (!ctx) {
      const message = err.message;
      lib.strata_model_free(model);
      throw new EngineError(message.startsWith("context:") ? "bad_input" : "engine_failed", message);
    }
    return new NativeEngine(lib, model, ctx, backend, facts, spec);
  }

  openSequence(): SeqId {
    return this.#seqs.open();
  }

  nextPosition(seq: SeqId): number {
    return this.#seqs.nextPosition(seq);
  }

  releaseSequence(seq: SeqId): Promise<void> {
    return this.#calls.run(() => {
      this.#seqs.release(seq);
      this.#check(this.lib.strata_seq_release(this.ctx, seq));
    });
  }

  decode(batch: DecodeBatch): Promise<DecodeOutputs> {
    return this.#calls.run(async () => {
      this.#seqs.check(batch, this.facts, this.input, this.spec.batchTokens);
      const n = batch.seq.length;
      const rows = this.#check(
        await this.lib.strata_decode(
          this.ctx,
          n,
          ...sized(batch.tokens),
          ...sized(batch.hidden),
          ...sized(batch.pos),
          ...sized(batch.seq),
          ...sized(batch.outputs),
        ),
      );
      this.#seqs.commit(batch);
      const dim = this.lib.strata_output_dim(this.ctx);
      const data = new Float32Array(rows * dim);
      if (rows > 0) this.#check(Number(this.lib.strata_outputs(this.ctx, data, BigInt(data.length))));
      return { rows, dim, data };
    });
  }

  /** Read in the engine's queue: never while a decode on a worker thread changes the KV cache. */
  memory(): Promise<EngineMemory> {
    return this.#calls.run(() => {
      const s = new BigInt64Array(5);
      this.#check(this.lib.strata_ctx_stats(this.ctx, s, 5));
      return {
        weightBytes: this.facts.weightBytes,
        kvCells: Number(s[0]),
        kvCellsUsed: Number(s[1]),
        kvBytes: Number(s[2]),
        sequencesOpen: this.#seqs.openCount,
        maxSequences: this.spec.maxSequences,
        kvCellsPerSequence: Number(s[4]),
      };
    });
  }

  /** Reference runs: record the residual stream after these layers in later decodes. */
  capture(layers: number[]): Promise<void> {
    return this.#calls.run(() => {
      this.#check(this.lib.strata_ctx_capture(this.ctx, new Int32Array(layers), layers.length));
    });
  }

  /** What the last decode recorded after layer il (n_tokens × n_embd). */
  captured(il: number): Promise<Float32Array> {
    return this.#calls.run(() => {
      // one decode records at most batchTokens rows of n_embd after a layer
      const out = new Float32Array(this.spec.batchTokens * this.facts.nEmbd);
      const n = this.#check(Number(this.lib.strata_ctx_captured(this.ctx, il, out, BigInt(out.length))));
      return out.slice(0, n);
    });
  }

  close(): Promise<void> {
    return this.#calls.close(() => {
      this.lib.strata_ctx_free(this.ctx);
      this.lib.strata_model_free(this.model);
    });
  }

  #check(code: number): number {
    if (code >= 0) return code;
    throw new EngineError(CODE[code] ?? "engine_failed", handleError(this.lib, { ctx: this.ctx }));
  }
}

/** An array for the C API with its element count (NULL and 0 when absent). */
function sized(a: Int32Array | Float32Array | Uint8Array | undefined): [BufferSource | null, number] {
  return a ? [a as Uint8Array<ArrayBuffer>, a.length] : [null, 0];
}
