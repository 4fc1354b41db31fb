// The flat C API through a WebAssembly module's exports: arguments are copied into the
// module's heap (malloc/free around each call) and results copied out. Exports that may
// reach a GPU wait go through WasmAbi.call (ASYNCIFY in the WebGPU flavor).
import type { DecodeBatch, GrammarSpec } from "../range-engine.ts";
import { packedTriggers } from "../strata-engine.ts";
import type { Made, StrataCalls } from "../strata-calls.ts";
import type { WasmAbi } from "./abi.ts";
import { heap, type StrataModule } from "./strata-module.ts";

const ERROR_CAP = 2048;
const STRING_CAP = 4096;

export class WasmCalls implements StrataCalls<number> {
  constructor(private readonly m: StrataModule, private readonly abi: WasmAbi) {}

  async modelLoad(path: string, start: number, end: number, gpuLayers: number, vocabOnly: boolean) {
    const bytes = new TextEncoder().encode(path + "\0");
    return await this.#scratch(bytes.length, (p) => {
      heap(this.m).set(bytes, p);
      return this.#made((err, cap) =>
        this.abi.call("strata_model_load", p, start, end, gpuLayers, vocabOnly ? 1 : 0, err, cap)
      );
    });
  }

  modelFacts(model: number, out: BigInt64Array): number {
    return this.#int64s(out, (p) => this.abi.now("strata_model_facts", model, p, out.length));
  }

  modelArch(model: number): string {
    return this.#string((b, c) => this.abi.now("strata_model_arch", model, b, c));
  }

  async modelFree(model: number): Promise<void> {
    await this.abi.call("strata_model_free", model);
  }

  ctxNew(
    model: number,
    kvCells: number,
    maxSeq: number,
    batchTokens: number,
    threads: number,
    flags: number,
  ) {
    return this.#made((err, cap) =>
      this.abi.call("strata_ctx_new", model, kvCells, maxSeq, batchTokens, threads, flags, err, cap)
    );
  }

  async ctxFree(ctx: number): Promise<void> {
    await this.abi.call("strata_ctx_free", ctx);
  }

  ctxError(ctx: number): string {
    return this.#string((b, c) => this.abi.now("strata_ctx_error", ctx, b, c));
  }

  ctxStats(ctx: number, out: BigInt64Array): number {
    return this.#int64s(out, (p) => this.abi.now("strata_ctx_stats", ctx, p, out.length));
  }

  lastPasses(ctx: number): number {
    return this.abi.now("strata_ctx_last_passes", ctx);
  }

  async decode(ctx: number, batch: DecodeBatch): Promise<number> {
    const put = (a: Int32Array | Float32Array | Uint8Array | undefined) => {
      if (!a) return 0;
      const p = this.abi.now("malloc", Math.max(1, a.byteLength));
      heap(this.m).set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), p);
      return p;
    };
    const arrays = [batch.tokens, batch.hidden, batch.pos, batch.seq, batch.outputs];
    const ptrs = arrays.map(put);
    try {
      // each array with its element count
      const args = arrays.flatMap((a, i) => [ptrs[i], a?.length ?? 0]);
      return await this.abi.call("strata_decode", ctx, batch.seq.length, ...args);
    } finally {
      for (const p of ptrs) if (p) this.abi.now("free", p);
    }
  }

  outputDim(ctx: number): number {
    return this.abi.now("strata_output_dim", ctx);
  }

  outputs(ctx: number, out: Float32Array): Promise<number> {
    return this.#scratch(out.byteLength, async (p) => {
      const n = await this.abi.call("strata_outputs", ctx, p, out.length);
      if (n >= 0) new Uint8Array(out.buffer).set(heap(this.m).subarray(p, p + out.byteLength));
      return n;
    });
  }

  seqRelease(ctx: number, seq: number): number {
    return this.abi.now("strata_seq_release", ctx, seq);
  }

  seqTrim(ctx: number, seq: number, pos: number): number {
    return this.abi.now("strata_seq_trim", ctx, seq, pos);
  }

  seqCopy(ctx: number, src: number, dst: number, pos: number): number {
    return this.abi.now("strata_seq_copy", ctx, src, dst, pos);
  }

  seqStateSize(ctx: number, seq: number): number {
    return this.abi.now("strata_seq_state_size", ctx, seq);
  }

  // both read or write the cache's tensors: on WebGPU that waits on the device
  seqStateGet(ctx: number, seq: number, out: Uint8Array): Promise<number> {
    return this.#scratch(out.byteLength, async (p) => {
      const n = await this.abi.call("strata_seq_state_get", ctx, seq, p, out.length);
      if (n >= 0) out.set(heap(this.m).subarray(p, p + out.byteLength));
      return n;
    });
  }

  seqStateSet(ctx: number, seq: number, bytes: Uint8Array): Promise<number> {
    return this.#scratch(bytes.byteLength, (p) => {
      heap(this.m).set(bytes, p);
      return this.abi.call("strata_seq_state_set", ctx, seq, p, bytes.length);
    });
  }

  grammarNew(model: number, spec: GrammarSpec): Made<number> {
    const bytes = new TextEncoder().encode(spec.gbnf);
    const t = packedTriggers(spec);
    const tokens = new Uint8Array(t.tokens.buffer);
    // text, then the patterns, then the tokens (4-byte aligned), in one scratch block
    const pAt = bytes.length;
    const tAt = (pAt + t.patterns.length + 3) & ~3;
    return this.#scratch(Math.max(4, tAt + tokens.length), (p) => {
      const h = heap(this.m);
      h.set(bytes, p);
      h.set(t.patterns, p + pAt);
      h.set(tokens, p + tAt);
      return this.#madeNow((err, cap) =>
        this.abi.now(
          "strata_grammar_new",
          model,
          p,
          bytes.length,
          p + pAt,
          t.patterns.length,
          t.count,
          p + tAt,
          t.tokens.length,
          err,
          cap,
        )
      );
    });
  }

  grammarFree(grammar: number): void {
    this.abi.now("strata_grammar_free", grammar);
  }

  grammarError(grammar: number): string {
    return this.#string((b, c) => this.abi.now("strata_grammar_error", grammar, b, c));
  }

  grammarApply(grammar: number, logits: Float32Array): number {
    return this.#scratch(logits.byteLength, (p) => {
      const bytes = new Uint8Array(logits.buffer, logits.byteOffset, logits.byteLength);
      heap(this.m).set(bytes, p);
      const n = this.abi.now("strata_grammar_apply", grammar, p, logits.length);
      if (n >= 0) bytes.set(heap(this.m).subarray(p, p + logits.byteLength));
      return n;
    });
  }

  grammarAccept(grammar: number, token: number): number {
    return this.abi.now("strata_grammar_accept", grammar, token);
  }

  /** fn with `bytes` of heap, freed after (after the Promise, when fn returns one) */
  #scratch<T>(bytes: number, fn: (p: number) => T): T {
    const p = this.abi.now("malloc", bytes);
    let r: T;
    try {
      r = fn(p);
    } catch (err) {
      this.abi.now("free", p);
      throw err;
    }
    if (!(r instanceof Promise)) {
      this.abi.now("free", p);
      return r;
    }
    return r.finally(() => this.abi.now("free", p)) as T;
  }

  /** A call that writes int64s: copied out of the heap into `out`. */
  #int64s(out: BigInt64Array, fill: (p: number) => number): number {
    return this.#scratch(out.byteLength, (p) => {
      const code = fill(p);
      out.set(new BigInt64Array(heap(this.m).slice(p, p + out.byteLength).buffer));
      return code;
    });
  }

  /** A string the C side writes into a buffer ("" when it wrote none). */
  #string(fill: (buf: number, cap: number) => number): string {
    return this.#scratch(STRING_CAP, (p) => {
      const n = fill(p, STRING_CAP);
      return n > 0 ? new TextDecoder().decode(heap(this.m).slice(p, p + Math.min(n, STRING_CAP - 1))) : "";
    });
  }

  /** A call without a handle: it reports its error into a heap buffer. */
  #made(call: (err: number, cap: number) => Promise<number>): Promise<Made<number>> {
    return this.#scratch(ERROR_CAP, async (p) => {
      heap(this.m)[p] = 0;
      return this.#madeOf(await call(p, ERROR_CAP), p);
    });
  }

  /** #made for a call that never waits */
  #madeNow(call: (err: number, cap: number) => number): Made<number> {
    return this.#scratch(ERROR_CAP, (p) => {
      heap(this.m)[p] = 0;
      return this.#madeOf(call(p, ERROR_CAP), p);
    });
  }

  #madeOf(handle: number, err: number): Made<number> {
    const h = heap(this.m);
    const end = h.indexOf(0, err);
    const error = new TextDecoder().decode(h.slice(err, end < 0 ? err + ERROR_CAP : end));
    return { handle: handle || null, error };
  }
}
