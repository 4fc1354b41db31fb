// The flat C API through Deno FFI: loads, context creation and decode run on a worker
// thread (nonblocking symbols) and return Promises; the rest are direct calls.
import type { DecodeBatch, GrammarSpec } from "../../../src/engine/range-engine.ts";
import { packedTriggers } from "../../../src/engine/strata-engine.ts";
import type { Made, StrataCalls } from "../../../src/engine/strata-calls.ts";
import { cstr, ErrorBuffer, readString, type StrataLib } from "./ffi.ts";

type Handle = Deno.PointerObject;

/** An array for the C API with its element count (NULL and 0 when absent). */
function sized(a: Int32Array | Float32Array | Uint8Array | undefined): [BufferSource | null, number] {
  return a ? [a as Uint8Array<ArrayBuffer>, a.length] : [null, 0];
}

/** A call that reports its error into a buffer of the caller's. */
async function made(
  call: (err: Uint8Array, cap: number) => Promise<Deno.PointerValue>,
): Promise<Made<Handle>> {
  const err = new ErrorBuffer();
  const handle = await call(err.buf, err.cap);
  return { handle, error: handle ? "" : err.message };
}

export class FfiCalls implements StrataCalls<Handle> {
  constructor(readonly lib: StrataLib) {}

  modelLoad(path: string, start: number, end: number, gpuLayers: number, vocabOnly: boolean) {
    return made((err, cap) =>
      this.lib.strata_model_load(cstr(path), start, end, gpuLayers, vocabOnly ? 1 : 0, err, cap)
    );
  }

  modelFacts(model: Handle, out: BigInt64Array): number {
    return this.lib.strata_model_facts(model, out, out.length);
  }

  modelArch(model: Handle): string {
    return readString((b, c) => this.lib.strata_model_arch(model, b, c));
  }

  modelFree(model: Handle): void {
    this.lib.strata_model_free(model);
  }

  ctxNew(
    model: Handle,
    kvCells: number,
    maxSeq: number,
    batchTokens: number,
    threads: number,
    flags: number,
  ) {
    return made((err, cap) =>
      this.lib.strata_ctx_new(model, kvCells, maxSeq, batchTokens, threads, flags, err, cap)
    );
  }

  ctxFree(ctx: Handle): void {
    this.lib.strata_ctx_free(ctx);
  }

  ctxError(ctx: Handle): string {
    return readString((b, c) => this.lib.strata_ctx_error(ctx, b, c));
  }

  ctxStats(ctx: Handle, out: BigInt64Array): number {
    return this.lib.strata_ctx_stats(ctx, out, out.length);
  }

  lastPasses(ctx: Handle): number {
    return this.lib.strata_ctx_last_passes(ctx);
  }

  decode(ctx: Handle, b: DecodeBatch): Promise<number> {
    return this.lib.strata_decode(
      ctx,
      b.seq.length,
      ...sized(b.tokens),
      ...sized(b.hidden),
      ...sized(b.pos),
      ...sized(b.seq),
      ...sized(b.outputs),
    );
  }

  outputDim(ctx: Handle): number {
    return this.lib.strata_output_dim(ctx);
  }

  outputs(ctx: Handle, out: Float32Array): number {
    return Number(this.lib.strata_outputs(ctx, out, BigInt(out.length)));
  }

  seqRelease(ctx: Handle, seq: number): number {
    return this.lib.strata_seq_release(ctx, seq);
  }

  seqTrim(ctx: Handle, seq: number, pos: number): number {
    return this.lib.strata_seq_trim(ctx, seq, pos);
  }

  seqCopy(ctx: Handle, src: number, dst: number, pos: number): number {
    return this.lib.strata_seq_copy(ctx, src, dst, pos);
  }

  seqStateSize(ctx: Handle, seq: number): number {
    return Number(this.lib.strata_seq_state_size(ctx, seq));
  }

  seqStateGet(ctx: Handle, seq: number, out: Uint8Array): number {
    return Number(this.lib.strata_seq_state_get(ctx, seq, out, BigInt(out.length)));
  }

  seqStateSet(ctx: Handle, seq: number, bytes: Uint8Array): number {
    return this.lib.strata_seq_state_set(ctx, seq, bytes, BigInt(bytes.length));
  }

  grammarNew(model: Handle, spec: GrammarSpec): Made<Handle> {
    const bytes = new TextEncoder().encode(spec.gbnf);
    const t = packedTriggers(spec);
    const err = new ErrorBuffer();
    const handle = this.lib.strata_grammar_new(
      model,
      bytes,
      bytes.length,
      t.patterns,
      t.patterns.length,
      t.count,
      t.tokens,
      t.tokens.length,
      err.buf,
      err.cap,
    );
    return { handle, error: handle ? "" : err.message };
  }

  grammarFree(grammar: Handle): void {
    this.lib.strata_grammar_free(grammar);
  }

  grammarError(grammar: Handle): string {
    return readString((b, c) => this.lib.strata_grammar_error(grammar, b, c));
  }

  grammarApply(grammar: Handle, logits: Float32Array): Promise<number> {
    return this.lib.strata_grammar_apply(grammar, logits as Float32Array<ArrayBuffer>, logits.length);
  }

  grammarAccept(grammar: Handle, token: number): number {
    return this.lib.strata_grammar_accept(grammar, token);
  }
}
