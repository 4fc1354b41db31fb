// The flat C API (vendor/llama.cpp/api/strata.h) as one runtime reaches it: Deno FFI
// (server/engine/native/) or a WebAssembly module's exports (src/engine/wasm/). Each call
// only marshals: it returns what the C side returns (a handle or null, a count or a
// negative code), and StrataEngine reads every result the same way for both.
import type { DecodeBatch, GrammarSpec } from "./range-engine.ts";

/** A handle from a call that reports its error into the caller's buffer (loads, context new). */
export interface Made<H> {
  readonly handle: H | null;
  /** the message the call wrote ("" when it wrote none) */
  readonly error: string;
}

export interface StrataCalls<H> {
  modelLoad(
    path: string,
    start: number,
    end: number,
    gpuLayers: number,
    vocabOnly: boolean,
  ): Promise<Made<H>>;
  /** strata_model_facts into `out` (10 int64s) */
  modelFacts(model: H, out: BigInt64Array): number;
  modelArch(model: H): string;
  modelFree(model: H): void | Promise<void>;
  ctxNew(
    model: H,
    kvCells: number,
    maxSequences: number,
    batchTokens: number,
    threads: number,
    flags: number,
  ): Promise<Made<H>>;
  ctxFree(ctx: H): void | Promise<void>;
  /** the context's last error ("" when none) */
  ctxError(ctx: H): string;
  /** strata_ctx_stats into `out` (8 int64s) */
  ctxStats(ctx: H, out: BigInt64Array): number;
  /** strata_ctx_last_passes: graph passes of the last decode */
  lastPasses(ctx: H): number;
  /** strata_decode with each array and its element count: output rows or a code */
  decode(ctx: H, batch: DecodeBatch): Promise<number>;
  outputDim(ctx: H): number;
  /** strata_outputs into `out` */
  outputs(ctx: H, out: Float32Array): number | Promise<number>;
  seqRelease(ctx: H, seq: number): number;
  /** strata_seq_trim: forget positions >= pos */
  seqTrim(ctx: H, seq: number, pos: number): number;
  /** strata_seq_copy: dst holds positions [0, pos) of src (shared cells; ordered pools only) */
  seqCopy(ctx: H, src: number, dst: number, pos: number): number;
  /** strata_seq_state_size: bytes of the sequence's state (0 when empty) */
  seqStateSize(ctx: H, seq: number): number;
  /** strata_seq_state_get into `out`: bytes written or a code */
  seqStateGet(ctx: H, seq: number, out: Uint8Array): number | Promise<number>;
  /** strata_seq_state_set: positions the sequence now holds, or a code */
  seqStateSet(ctx: H, seq: number, bytes: Uint8Array): number | Promise<number>;
  /** strata_grammar_new over the model's vocabulary */
  grammarNew(model: H, spec: GrammarSpec): Made<H>;
  grammarFree(grammar: H): void;
  /** the grammar's last error ("" when none) */
  grammarError(grammar: H): string;
  /** strata_grammar_apply on `logits` in place: tokens allowed, or a code */
  grammarApply(grammar: H, logits: Float32Array): number | Promise<number>;
  /** strata_grammar_accept: 0 or a code */
  grammarAccept(grammar: H, token: number): number;
}
