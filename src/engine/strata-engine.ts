// The engine on the flat C API, for every runtime that reaches it (StrataCalls: Deno FFI
// for the native library, exports for the WASM build): how a model and its context are
// opened, how codes and messages become EngineErrors, how facts and stats are decoded.
import { EngineError, type EngineErrorCode } from "./errors.ts";
import { layerRange } from "./layer-range.ts";
import { type KvCells, QueuedEngine } from "./queued-engine.ts";
import type {
  DecodeBatch,
  DecodeOutputs,
  Grammar,
  GrammarSpec,
  KvLayout,
  ModelFacts,
  SeqId,
  ShardSpec,
} from "./range-engine.ts";
import type { StrataCalls } from "./strata-calls.ts";

/** strata.h's STRATA_KV_* */
const KV_LAYOUT: Record<number, KvLayout> = { 0: "shared", 1: "ordered", 2: "streams" };

/** strata.h's negative codes */
const CODE: Record<number, EngineErrorCode> = { [-1]: "bad_input", [-2]: "kv_full", [-3]: "engine_failed" };

function loadError(message: string): EngineError {
  if (message.startsWith("unsupported architecture")) return new EngineError("unsupported_arch", message);
  if (message.startsWith("invalid layer range")) return new EngineError("bad_range", message);
  return new EngineError("load_failed", message);
}

const orUnknown = (message: string) => message || "unknown engine error";

/** Loads a model (a range, the whole, or vocab only) and returns its handle. */
export async function loadModel<H>(
  calls: StrataCalls<H>,
  path: string,
  range: ShardSpec["range"],
  gpuLayers: number,
  vocabOnly: boolean,
): Promise<H> {
  const [start, end] = range === "whole" ? [0, 0] : [range.start, range.end];
  const made = await calls.modelLoad(path, start, end, gpuLayers, vocabOnly);
  if (made.handle === null) throw loadError(orUnknown(made.error));
  return made.handle;
}

export function modelFacts<H>(calls: StrataCalls<H>, model: H): ModelFacts {
  const f = new BigInt64Array(10);
  calls.modelFacts(model, f);
  const n = (i: number) => Number(f[i]);
  return {
    arch: calls.modelArch(model),
    nLayer: n(0),
    seamWidth: n(1),
    nVocab: n(2),
    nCtxTrain: n(3),
    range: layerRange(n(4), n(5), n(0)),
    nHead: n(6),
    nHeadKv: n(7),
    weightBytes: n(8),
    nExpert: n(9),
  };
}

/** A loaded model with its context. */
export interface Opened<H> {
  readonly model: H;
  readonly ctx: H;
  readonly facts: ModelFacts;
}

/** Makes the model's context (flags: contextFlags); when that fails the model is freed. */
export async function openContext<H>(
  calls: StrataCalls<H>,
  model: H,
  spec: ShardSpec,
  flags: number,
): Promise<Opened<H>> {
  const facts = modelFacts(calls, model);
  const made = await calls.ctxNew(
    model,
    spec.kvCells,
    spec.maxSequences,
    spec.batchTokens,
    spec.threads,
    flags,
  );
  if (made.handle === null) {
    const message = orUnknown(made.error);
    await calls.modelFree(model);
    throw new EngineError(message.startsWith("context:") ? "bad_input" : "engine_failed", message);
  }
  return { model, ctx: made.handle, facts };
}

export abstract class StrataEngine<H> extends QueuedEngine {
  protected readonly ctx: H;
  readonly #model: H;

  protected constructor(
    protected readonly calls: StrataCalls<H>,
    opened: Opened<H>,
    backend: string,
    recipe: Uint8Array,
    spec: ShardSpec,
  ) {
    super(backend, opened.facts, recipe, spec);
    this.ctx = opened.ctx;
    this.#model = opened.model;
  }

  protected async compute(batch: DecodeBatch, accepted: () => void): Promise<DecodeOutputs> {
    const rows = this.check(await this.calls.decode(this.ctx, batch));
    accepted();
    const dim = this.calls.outputDim(this.ctx);
    const data = batch.into && batch.into.length >= rows * dim
      ? batch.into.subarray(0, rows * dim)
      : new Float32Array(rows * dim);
    if (rows > 0) this.check(await this.calls.outputs(this.ctx, data));
    return { rows, dim, data, passes: this.calls.lastPasses(this.ctx) };
  }

  protected freeCells(seq: SeqId): void {
    this.check(this.calls.seqRelease(this.ctx, seq));
  }

  protected trimCells(seq: SeqId, pos: number): void {
    this.check(this.calls.seqTrim(this.ctx, seq, pos));
  }

  protected copyCells(src: SeqId, dst: SeqId, pos: number): void {
    this.check(this.calls.seqCopy(this.ctx, src, dst, pos));
  }

  protected override async exportCells(seq: SeqId): Promise<Uint8Array> {
    const out = new Uint8Array(this.check(this.calls.seqStateSize(this.ctx, seq)));
    if (out.length > 0) this.check(await this.calls.seqStateGet(this.ctx, seq, out));
    return out;
  }

  protected override async importCells(seq: SeqId, state: Uint8Array): Promise<number> {
    return this.check(await this.calls.seqStateSet(this.ctx, seq, state));
  }

  protected kvCells(): KvCells {
    const s = new BigInt64Array(8);
    this.check(this.calls.ctxStats(this.ctx, s));
    return {
      kvCells: Number(s[0]),
      kvCellsUsed: Number(s[1]),
      kvBytes: Number(s[2]),
      kvCellsPerSequence: Number(s[4]),
      graphPasses: Number(s[5]),
      kvLayout: KV_LAYOUT[Number(s[6])] ?? "shared",
      computeBytes: Number(s[7]),
    };
  }

  // not in the queue: a grammar reads the vocabulary only, never the context
  grammar(spec: GrammarSpec): Promise<Grammar> {
    const made = this.calls.grammarNew(this.#model, spec);
    if (made.handle === null) return Promise.reject(new EngineError("bad_input", orUnknown(made.error)));
    return Promise.resolve(new CallsGrammar(this.calls, made.handle));
  }

  protected async free(): Promise<void> {
    await this.calls.ctxFree(this.ctx);
    await this.calls.modelFree(this.#model);
  }

  /** A count, or the context's error with the code's meaning. */
  protected check(code: number): number {
    if (code >= 0) return code;
    throw new EngineError(CODE[code] ?? "engine_failed", orUnknown(this.calls.ctxError(this.ctx)));
  }
}

/** A grammar handle of the C API. */
export class CallsGrammar<H> implements Grammar {
  #closed = false;
  #masking = 0;

  constructor(private readonly calls: StrataCalls<H>, private readonly g: H) {}

  async mask(logits: Float32Array): Promise<void> {
    this.#open();
    this.#masking++;
    try {
      if (this.#check(await this.calls.grammarApply(this.g, logits)) === 0) {
        throw new EngineError("bad_input", "the grammar allows no token here");
      }
    } finally {
      // freed once the last mask in flight is done (a native mask runs on another thread)
      if (--this.#masking === 0 && this.#closed) this.calls.grammarFree(this.g);
    }
  }

  accept(token: number): Promise<void> {
    try {
      this.#open();
      this.#check(this.calls.grammarAccept(this.g, token));
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  close(): Promise<void> {
    if (!this.#closed && this.#masking === 0) this.calls.grammarFree(this.g);
    this.#closed = true;
    return Promise.resolve();
  }

  #open(): void {
    if (this.#closed) throw new EngineError("bad_input", "the grammar is closed");
  }

  #check(code: number): number {
    if (code >= 0) return code;
    throw new EngineError(CODE[code] ?? "engine_failed", orUnknown(this.calls.grammarError(this.g)));
  }
}

/** A grammar's triggers as the C API takes them: patterns NUL-terminated and packed, token ids. */
export function packedTriggers(
  spec: GrammarSpec,
): { patterns: Uint8Array; count: number; tokens: Int32Array } {
  const enc = new TextEncoder();
  const parts = (spec.triggerPatterns ?? []).map((p) => enc.encode(p + "\0"));
  const patterns = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    patterns.set(p, at);
    at += p.length;
  }
  return { patterns, count: parts.length, tokens: Int32Array.from(spec.triggerTokens ?? []) };
}
