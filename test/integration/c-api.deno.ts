// Run by c-api.test.ts under Deno: drives the flat C API straight through Deno FFI with
// hostile arguments (oversized batches, NULL buffers, wrong lengths, absurd thread counts,
// messages that run past their buffer), then decodes the same prompt as before them. Prints
// one JSON object: each call's code and message, and whether the logits after equal those
// before bit for bit. The process must survive all of it.
import { synthModel } from "../../src/model/synth.ts";
import { ensureNativeLibrary } from "../../server/build/native.ts";
import { cstr, ErrorBuffer, handleError, openStrata } from "../../server/engine/native/ffi.ts";

const dir = Deno.makeTempDirSync();
const path = `${dir}/llama.gguf`;
Deno.writeFileSync(path, synthModel({ arch: "llama", seed: 5, weightType: "q8_0", nEmbd: 128, nFf: 256 }));
const lib = openStrata(await ensureNativeLibrary("cpu"));
const results: Record<string, string> = {};
const fail = (
  name: string,
  code: number | bigint,
  message: string,
) => (results[name] = `${code}: ${message}`);

const loadErr = new ErrorBuffer();
const model = await lib.strata_model_load(cstr(path), 0, 0, 0, 0, loadErr.buf, loadErr.cap);
if (!model) throw new Error(loadErr.message);
const facts = new BigInt64Array(10);
lib.strata_model_facts(model, facts, 10);
const nVocab = Number(facts[2]);
results["n_vocab"] = String(nVocab);

async function newCtx(nCtx: number, nSeq: number, nBatch: number, threads: number) {
  const err = new ErrorBuffer();
  const ctx = await lib.strata_ctx_new(model!, nCtx, nSeq, nBatch, threads, 0, err.buf, err.cap);
  return { ctx, message: err.message };
}
const ok = await newCtx(256, 4, 64, 2);
if (!ok.ctx) throw new Error(ok.message);
const ctx = ok.ctx;
const other = (await newCtx(128, 2, 16, 1)).ctx!;
const ctxErr = (c: Deno.PointerObject) => handleError(lib, { ctx: c });

const prompt = Int32Array.of(1, 17, 40, 200, 9);
const n = prompt.length;
const lastOnly = Uint8Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0));
async function promptLogits(seq: number): Promise<Float32Array> {
  const pos = Int32Array.from({ length: n }, (_, i) => i);
  const seqs = new Int32Array(n).fill(seq);
  const rows = await lib.strata_decode(ctx, n, prompt, n, null, 0, pos, n, seqs, n, lastOnly, n);
  if (rows !== 1) throw new Error(`decode: ${rows} ${ctxErr(ctx)}`);
  const out = new Float32Array(nVocab);
  lib.strata_outputs(ctx, out, BigInt(out.length));
  return out;
}
const before = await promptLogits(0);

// contexts: absurd sizes and thread counts are refused before anything is allocated
for (
  const [name, args] of [
    ["ctx_huge_batch", [256, 4, 2 ** 31 - 1, 1]],
    ["ctx_huge_cells", [2 ** 31 - 1, 4, 64, 1]],
    ["ctx_absurd_threads", [256, 4, 64, 100_000]],
    ["ctx_negative_threads", [256, 4, 64, -3]],
    ["ctx_too_many_sequences", [256, 100_000, 64, 1]],
  ] as const
) {
  const r = await newCtx(...(args as unknown as [number, number, number, number]));
  fail(name, r.ctx ? 1 : 0, r.message);
}
{
  const r = await lib.strata_ctx_new(null, 256, 4, 64, 1, 0, null, 0);
  results["ctx_null_model"] = String(r === null ? 0 : 1);
}

// decode: every array checked against the batch's size
const i32 = (k: number) => new Int32Array(k);
const decodeCalls: Record<string, () => Promise<number>> = {
  oversized_batch: () =>
    lib.strata_decode(ctx, 1_000_000_000, prompt, n, null, 0, i32(n), n, i32(n), n, null, 0),
  null_tokens_with_length: () => lib.strata_decode(ctx, n, null, n, null, 0, i32(n), n, i32(n), n, null, 0),
  short_tokens: () =>
    lib.strata_decode(ctx, n, prompt.subarray(0, 2), 2, null, 0, i32(n), n, i32(n), n, null, 0),
  null_positions: () => lib.strata_decode(ctx, n, prompt, n, null, 0, null, 0, i32(n), n, null, 0),
  null_sequences_with_length: () =>
    lib.strata_decode(ctx, n, prompt, n, null, 0, i32(n), n, null, n, null, 0),
  short_outputs: () =>
    lib.strata_decode(ctx, n, prompt, n, null, 0, i32(n), n, i32(n), n, new Uint8Array(1), 1),
  negative_length: () => lib.strata_decode(ctx, n, prompt, -1, null, 0, i32(n), n, i32(n), n, null, 0),
  hidden_to_first_range: () =>
    lib.strata_decode(ctx, 1, null, 0, new Float32Array(128), 128, i32(1), 1, i32(1), 1, null, 0),
  unknown_sequence: () =>
    lib.strata_decode(ctx, 1, prompt, 1, null, 0, i32(1), 1, Int32Array.of(99), 1, null, 0),
  token_outside_vocab: () =>
    lib.strata_decode(ctx, 1, Int32Array.of(nVocab + 5), 1, null, 0, i32(1), 1, i32(1), 1, null, 0),
  zero_tokens: () => lib.strata_decode(ctx, 0, null, 0, null, 0, null, 0, null, 0, null, 0),
};
for (const [name, call] of Object.entries(decodeCalls)) fail(`decode_${name}`, await call(), ctxErr(ctx));

// errors are kept per context: a failure on another context leaves this one's message alone
const mine = ctxErr(ctx);
await lib.strata_decode(other, 1, prompt, 1, null, 0, i32(1), 1, Int32Array.of(7), 1, null, 0);
results["errors_per_context"] = JSON.stringify({ mine: ctxErr(ctx) === mine, other: ctxErr(other) });

// reads and small calls: NULL buffers with a capacity, counts past what was given
fail("outputs_null_buffer", lib.strata_outputs(ctx, null, 100n), ctxErr(ctx));
fail("stats_null_buffer", lib.strata_ctx_stats(ctx, null, 4), ctxErr(ctx));
fail("captured_null_buffer", lib.strata_ctx_captured(ctx, 0, null, 10n), ctxErr(ctx));
fail("capture_layer_outside", lib.strata_ctx_capture(ctx, Int32Array.of(0, 999), 2), ctxErr(ctx));
fail("capture_null_layers", lib.strata_ctx_capture(ctx, null, 3), ctxErr(ctx));
fail("threads_zero", lib.strata_ctx_threads(ctx, 0), ctxErr(ctx));
fail("threads_absurd", lib.strata_ctx_threads(ctx, 1_000_000), ctxErr(ctx));
fail("release_unknown", lib.strata_seq_release(ctx, 4096), ctxErr(ctx));
fail("trim_unknown", lib.strata_seq_trim(ctx, 4096, 0), ctxErr(ctx));
fail("trim_negative", lib.strata_seq_trim(ctx, 0, -1), ctxErr(ctx));
fail("copy_unknown", lib.strata_seq_copy(ctx, 0, 4096, 1), ctxErr(ctx));
fail("copy_unordered", lib.strata_seq_copy(ctx, 0, 1, 2), ctxErr(ctx));
fail("state_unordered", Number(lib.strata_seq_state_size(ctx, 0)), ctxErr(ctx));
{
  // an ordered pool (batch-invariant): a prefix copied to another sequence goes on as the whole
  // prompt prefilled there would, bit for bit, and the source keeps its own
  const err = new ErrorBuffer();
  const ordered = await lib.strata_ctx_new(model!, 256, 4, 64, 1, 2, err.buf, err.cap);
  if (!ordered) throw new Error(err.message);
  const run = async (seq: number, from: number, to: number) => {
    const k = to - from;
    const rows = await lib.strata_decode(
      ordered,
      k,
      prompt.subarray(from, to),
      k,
      null,
      0,
      Int32Array.from({ length: k }, (_, i) => from + i),
      k,
      new Int32Array(k).fill(seq),
      k,
      Uint8Array.from({ length: k }, (_, i) => (i === k - 1 ? 1 : 0)),
      k,
    );
    const out = new Float32Array(nVocab);
    lib.strata_outputs(ordered, out, BigInt(out.length));
    return rows === 1 ? out : undefined;
  };
  const cold = await run(0, 0, n);
  results["copy"] = String(lib.strata_seq_copy(ordered, 0, 1, 3));
  results["copy_pos_max"] = String(lib.strata_seq_pos_max(ordered, 1));
  const warm = await run(1, 3, n);
  results["copy_same_logits"] = String(!!cold && !!warm && cold.every((v, i) => Object.is(v, warm[i])));
  results["copy_source_kept"] = String(lib.strata_seq_pos_max(ordered, 0));
  // a sequence's state moved to another context of the same model goes on bit for bit
  const size = Number(lib.strata_seq_state_size(ordered, 0));
  const state = new Uint8Array(size);
  results["state_get"] = String(Number(lib.strata_seq_state_get(ordered, 0, state, BigInt(size))) === size);
  const other = await lib.strata_ctx_new(model!, 256, 4, 64, 1, 2, err.buf, err.cap);
  if (!other) throw new Error(err.message);
  results["state_set"] = String(lib.strata_seq_state_set(other, 3, state, BigInt(size)));
  const next = async (c: Deno.PointerValue, seq: number) => {
    const rows = await lib.strata_decode(
      c,
      1,
      prompt.subarray(0, 1),
      1,
      null,
      0,
      Int32Array.of(n),
      1,
      Int32Array.of(seq),
      1,
      Uint8Array.of(1),
      1,
    );
    const out = new Float32Array(nVocab);
    lib.strata_outputs(c, out, BigInt(out.length));
    return rows === 1 ? out : undefined;
  };
  const here = await next(ordered, 0), there = await next(other, 3);
  results["state_same_logits"] = String(!!here && !!there && here.every((v, i) => Object.is(v, there[i])));
  // what llama.cpp cannot read is refused, and the sequence it was for is left empty
  fail(
    "state_truncated",
    lib.strata_seq_state_set(other, 2, state.subarray(0, size >> 1), BigInt(size >> 1)),
    ctxErr(other),
  );
  results["state_truncated_empty"] = String(lib.strata_seq_pos_max(other, 2));
  fail("state_garbage", lib.strata_seq_state_set(other, 2, new Uint8Array(64).fill(7), 64n), ctxErr(other));
  fail("state_short_buffer", Number(lib.strata_seq_state_get(ordered, 0, state, 16n)), ctxErr(ordered));
  lib.strata_ctx_free(other);
  lib.strata_ctx_free(ordered);
}
{
  // a repair takes back the prompt's last position and runs it again: the same logits
  results["trim"] = String(lib.strata_seq_trim(ctx, 0, n - 1));
  results["pos_max_after_trim"] = String(lib.strata_seq_pos_max(ctx, 0));
  const rows = await lib.strata_decode(
    ctx,
    1,
    prompt.subarray(n - 1),
    1,
    null,
    0,
    Int32Array.of(n - 1),
    1,
    Int32Array.of(0),
    1,
    Uint8Array.of(1),
    1,
  );
  const again = new Float32Array(nVocab);
  lib.strata_outputs(ctx, again, BigInt(again.length));
  results["same_logits_after_trim"] = String(rows === 1 && before.every((v, i) => Object.is(v, again[i])));
}
const modelErr = () => handleError(lib, { model: model! });
fail("facts_null_buffer", lib.strata_model_facts(model, null, 10), modelErr());
fail("tokenize_null_out", lib.strata_tokenize(model, cstr("hello"), 5, 0, 0, null, 64), modelErr());
fail("tokenize_null_text", lib.strata_tokenize(model, null, 5, 0, 0, new Int32Array(8), 8), modelErr());
fail(
  "tokenize_negative_length",
  lib.strata_tokenize(model, cstr("hello"), -4, 0, 0, new Int32Array(8), 8),
  modelErr(),
);
fail("piece_null_buffer", lib.strata_token_piece(model, 5, null, 32), modelErr());
fail("piece_outside_vocab", lib.strata_token_piece(model, -7, new Uint8Array(32), 32), modelErr());
fail("arch_null_buffer", lib.strata_model_arch(model, null, 16), modelErr());
fail("backends_null_buffer", lib.strata_backends(null, 64), "");
fail("model_error_null_model", lib.strata_model_error(null, new Uint8Array(8), 8), "");
{
  // "user\0hi" without its last NUL: the content runs past the bytes given
  const msgs = new TextEncoder().encode("user\0hi");
  const err = new ErrorBuffer();
  const r = lib.strata_chat_apply(
    cstr("chatml"),
    msgs,
    msgs.length,
    1,
    1,
    new Uint8Array(256),
    256,
    err.buf,
    err.cap,
  );
  fail("chat_unterminated_message", r, err.message);
  const err2 = new ErrorBuffer();
  const ok2 = new TextEncoder().encode("user\0hi\0");
  const r2 = lib.strata_chat_apply(
    cstr("chatml"),
    ok2,
    ok2.length,
    5,
    1,
    new Uint8Array(256),
    256,
    err2.buf,
    err2.cap,
  );
  fail("chat_count_past_messages", r2, err2.message);
  const err3 = new ErrorBuffer();
  const r3 = lib.strata_chat_apply(cstr("chatml"), ok2, ok2.length, 1, 1, null, 256, err3.buf, err3.cap);
  fail("chat_null_buffer", r3, err3.message);
}
{
  const err = new ErrorBuffer();
  const r = await lib.strata_model_load(cstr(`${dir}/missing.gguf`), 0, 0, 0, 0, err.buf, err.cap);
  fail("load_missing_file", r ? 1 : 0, err.message);
  const r2 = await lib.strata_model_load(null, 0, 0, 0, 0, null, 0);
  results["load_null_path_no_error_buffer"] = String(r2 ? 1 : 0);
}
{
  // a GGUF of nextn (MTP) layers alone: no trunk, so it loads whole, and no range of it exists
  const mtp = `${dir}/mtp-only.gguf`;
  Deno.writeFileSync(mtp, synthModel({ arch: "glm4moe", nLayer: 0, leadingDense: 0, seed: 2 }));
  const err = new ErrorBuffer();
  const whole = await lib.strata_model_load(cstr(mtp), 0, 0, 0, 0, err.buf, err.cap);
  const f = new BigInt64Array(6);
  if (whole) lib.strata_model_facts(whole, f, 6);
  results["mtp_only_whole"] = whole ? `layers ${f[0]}, embd ${f[1]}` : err.message;
  if (whole) lib.strata_model_free(whole);
  const r = await lib.strata_model_load(cstr(mtp), 0, 1, 0, 0, err.buf, err.cap);
  fail("mtp_only_range", r ? 1 : 0, err.message);
}

{
  // grammars: NULL and empty texts, a NUL inside, one past the size bound, a bad one; logits of
  // the wrong length; tokens outside the vocabulary or refused; NULL handles; schemas
  const grammar = (text: string | Uint8Array | null, len?: number) => {
    const err = new ErrorBuffer();
    const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
    const g = lib.strata_grammar_new(
      model!,
      bytes,
      len ?? bytes?.length ?? 0,
      null,
      0,
      0,
      null,
      0,
      err.buf,
      err.cap,
    );
    return { g, message: err.message };
  };
  for (
    const [name, text, len] of [
      ["grammar_null_text", null, 5],
      ["grammar_empty", "", 0],
      ["grammar_nul_inside", 'root ::= "a"\0', undefined],
      ["grammar_too_big", "x", (1 << 20) + 1],
      ["grammar_undefined_rule", "root ::= nothing", undefined],
    ] as const
  ) {
    const { g, message } = grammar(text, len);
    fail(name, g ? 1 : 0, message);
  }
  fail(
    "grammar_null_model",
    lib.strata_grammar_new(null, new Uint8Array(4), 4, null, 0, 0, null, 0, null, 0) ? 1 : 0,
    "",
  );
  {
    // triggers: a pattern past its bytes, a bad regex, a token outside the vocabulary
    const text = new TextEncoder().encode('root ::= "a"');
    const lazy = (patterns: string, n: number, tokens: number[]) => {
      const err = new ErrorBuffer();
      const p = new TextEncoder().encode(patterns);
      const g = lib.strata_grammar_new(
        model!,
        text,
        text.length,
        p,
        p.length,
        n,
        Int32Array.from(tokens),
        tokens.length,
        err.buf,
        err.cap,
      );
      if (g) lib.strata_grammar_free(g);
      return `${g ? 1 : 0}: ${err.message}`;
    };
    results["grammar_pattern_unterminated"] = lazy("abc", 1, []);
    results["grammar_pattern_bad_regex"] = lazy("(unclosed\0", 1, []);
    results["grammar_trigger_outside_vocab"] = lazy("", 0, [nVocab + 1]);
    results["grammar_lazy_ok"] = lazy("<call>\0", 1, [3]);
  }
  const { g } = grammar('root ::= "a"');
  const gErr = () => {
    const b = new Uint8Array(256);
    const n = lib.strata_grammar_error(g!, b, b.length);
    return new TextDecoder().decode(b.subarray(0, Math.min(n, 255)));
  };
  fail("grammar_apply_wrong_length", await lib.strata_grammar_apply(g!, new Float32Array(3), 3), gErr());
  fail("grammar_apply_null_logits", await lib.strata_grammar_apply(g!, null, nVocab), gErr());
  fail("grammar_accept_outside_vocab", lib.strata_grammar_accept(g!, nVocab + 5), gErr());
  fail(
    "grammar_apply_null_grammar",
    await lib.strata_grammar_apply(null, new Float32Array(nVocab), nVocab),
    "",
  );
  fail("grammar_accept_null_grammar", lib.strata_grammar_accept(null, 1), "");
  // the synthetic vocabulary's token for "a" is allowed; every other refused
  const logits = new Float32Array(nVocab);
  results["grammar_allows"] = String(await lib.strata_grammar_apply(g!, logits, nVocab));
  const refused = logits.findIndex((v) => v === -Infinity);
  fail("grammar_accept_refused", lib.strata_grammar_accept(g!, refused), gErr());
  lib.strata_grammar_free(g!);
  lib.strata_grammar_free(null);
  const schema = (text: string) => {
    const err = new ErrorBuffer();
    const bytes = new TextEncoder().encode(text);
    return fail(
      `schema_${text.length}`,
      lib.strata_json_schema_grammar!(bytes, bytes.length, null, 0, err.buf, err.cap),
      err.message,
    );
  };
  results["schema_not_json"] = schema("{not json");
  results["schema_bad_type"] = schema('{"type": "objekt"}');
  results["schema_length_only"] = schema('{"type": "object"}');
}

// after all of that: the same prompt in a fresh sequence gives the same logits, bit for bit
lib.strata_seq_release(ctx, 0);
const after = await promptLogits(1);
results["same_logits_after"] = String(before.every((v, i) => Object.is(v, after[i])));
const stats = new BigInt64Array(4);
lib.strata_seq_release(ctx, 1);
lib.strata_ctx_stats(ctx, stats, 4);
results["cells_after_release"] = String(stats[1]);
lib.strata_ctx_free(ctx);
lib.strata_ctx_free(other);
lib.strata_model_free(model);
Deno.removeSync(dir, { recursive: true });
console.log(JSON.stringify(results));
