import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("the flat C API cannot be crashed by its caller (Deno FFI, hostile arguments)", () => {
  it("refuses every hostile call with a code and a message, keeps errors per context, and decodes the same after", async () => {
    const r = await denoRun(`${root}test/integration/c-api.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    const bounds =
      /^0: context: n_ctx in \[1, 16777216\], n_seq_max in \[1, 256\], n_batch in \[1, 65536\] and n_threads in \[1, 256\]/;
    for (
      const k of [
        "ctx_huge_batch",
        "ctx_huge_cells",
        "ctx_absurd_threads",
        "ctx_negative_threads",
        "ctx_too_many_sequences",
      ]
    ) {
      expect(out[k], k).toMatch(bounds);
    }
    expect(out.ctx_null_model).toBe("0");
    expect(out.decode_oversized_batch).toBe("-1: batch of 1000000000 tokens; the context takes 1 to 64");
    expect(out.decode_null_tokens_with_length).toBe("-1: decode: tokens is NULL with a length of 5");
    expect(out.decode_short_tokens).toBe("-1: decode: tokens holds 2 elements; a batch of 5 needs 5");
    expect(out.decode_null_positions).toBe("-1: decode: positions missing; a batch of 5 needs 5");
    expect(out.decode_null_sequences_with_length).toBe("-1: decode: sequences is NULL with a length of 5");
    expect(out.decode_short_outputs).toBe("-1: decode: outputs holds 1 elements; a batch of 5 needs 5");
    expect(out.decode_negative_length).toBe("-1: decode: tokens has a negative length");
    expect(out.decode_hidden_to_first_range).toBe(
      "-1: the first layer range takes token ids, not hidden states",
    );
    expect(out.decode_unknown_sequence).toBe("-1: unknown sequence 99 (the context holds 4)");
    expect(out.decode_token_outside_vocab).toMatch(/^-1: token id \d+ outside the vocabulary$/);
    expect(out.decode_zero_tokens).toBe("-1: batch of 0 tokens; the context takes 1 to 64");
    // another context's failure never overwrites this one's message
    expect(JSON.parse(out.errors_per_context)).toEqual({
      mine: true,
      other: "unknown sequence 7 (the context holds 2)",
    });
    for (
      const k of [
        "outputs_null_buffer",
        "stats_null_buffer",
        "captured_null_buffer",
        "capture_null_layers",
        "facts_null_buffer",
        "tokenize_null_out",
        "tokenize_null_text",
        "piece_null_buffer",
        "arch_null_buffer",
        "chat_null_buffer",
      ]
    ) expect(out[k], k).toMatch(/^-1: .*NULL/);
    expect(out.tokenize_negative_length).toMatch(/^-1: .*negative length/);
    expect(out.capture_layer_outside).toBe("-1: capture: layer 999 is not in [0, 6)");
    expect(out.threads_zero).toBe("-1: threads: 1 to 2 (this context's pool), not 0");
    expect(out.threads_absurd).toBe("-1: threads: 1 to 2 (this context's pool), not 1000000");
    expect(out.release_unknown).toBe("-1: unknown sequence 4096");
    expect(out.trim_unknown).toBe("-1: unknown sequence 4096");
    expect(out.copy_unknown).toBe("-1: unknown sequence 4096");
    expect(out.copy_unordered).toBe("-1: sequences share cells only in an ordered pool");
    // a copied prefix goes on bit for bit as the cold prompt; the source keeps its positions
    expect([out.copy, out.copy_pos_max, out.copy_same_logits, out.copy_source_kept]).toEqual([
      "0",
      "2",
      "true",
      "4",
    ]);
    // a sequence's state taken to another context goes on bit for bit; what llama.cpp cannot
    // read is refused, and leaves the sequence empty
    expect([out.state_get, out.state_set, out.state_same_logits]).toEqual(["true", "5", "true"]);
    expect(out.state_unordered).toBe("-1: sequence state moves only from an ordered pool");
    expect(out.state_truncated).toMatch(/^-1: llama.cpp refused the sequence state/);
    expect(out.state_truncated_empty).toBe("-1");
    expect(out.state_garbage).toMatch(/^-1: llama.cpp refused the sequence state/);
    expect(out.state_short_buffer).toMatch(/^-1: state: \d+ bytes into 16$/);
    expect(out.trim_negative).toBe("-1: trim to a negative position");
    // taking back a position and running it again gives the same logits, bit for bit
    expect([out.trim, out.pos_max_after_trim, out.same_logits_after_trim]).toEqual(["0", "3", "true"]);
    expect(out.piece_outside_vocab).toBe("-1: token id -7 outside the vocabulary");
    expect(out.backends_null_buffer).toBe("-1: ");
    expect(out.model_error_null_model).toBe("-1: ");
    expect(out.chat_unterminated_message).toBe("-1: chat: message 0 runs past the 7 bytes given");
    expect(out.chat_count_past_messages).toBe("-1: chat: message 1 runs past the 8 bytes given");
    expect(out.load_missing_file).toMatch(/^0: not a readable GGUF file: .*missing\.gguf$/);
    expect(out.load_null_path_no_error_buffer).toBe("0");
    expect(out.mtp_only_whole).toBe("layers 0, embd 64");
    expect(out.mtp_only_range).toBe("0: invalid layer range [0, 1) for a model with 0 layers");
    expect({
      null_text: out.grammar_null_text,
      empty: out.grammar_empty,
      nul: out.grammar_nul_inside,
      big: out.grammar_too_big,
      undefined_rule: out.grammar_undefined_rule,
      null_model: out.grammar_null_model,
      wrong_length: out.grammar_apply_wrong_length,
      null_logits: out.grammar_apply_null_logits,
      outside: out.grammar_accept_outside_vocab,
      null_grammar: [out.grammar_apply_null_grammar, out.grammar_accept_null_grammar],
      refused: out.grammar_accept_refused,
    }).toEqual({
      null_text: "0: grammar: NULL text with a length of 5",
      empty: "0: grammar: empty",
      nul: "0: grammar: a NUL byte inside the text",
      big: "0: grammar: 1048577 bytes, more than 1048576",
      undefined_rule: "0: grammar: failed to parse grammar",
      null_model: "0: ",
      wrong_length: `-1: grammar: 3 logits for a vocabulary of ${out.n_vocab}`,
      null_logits: "-1: grammar: logits is NULL",
      outside: `-1: grammar: token id ${Number(out.n_vocab) + 5} outside the vocabulary`,
      null_grammar: ["-1: ", "-1: "],
      refused: expect.stringMatching(/^-1: grammar: token \d+ is not allowed here$/),
    });
    expect(Number(out.grammar_allows)).toBeGreaterThan(0);
    expect(out.grammar_pattern_unterminated).toBe("0: grammar: trigger 0 runs past the 3 bytes given");
    expect(out.grammar_pattern_bad_regex).toMatch(/^0: grammar: /);
    expect(out.grammar_trigger_outside_vocab).toMatch(
      /^0: grammar: trigger token \d+ outside the vocabulary$/,
    );
    expect(out.grammar_lazy_ok).toMatch(/^1: /);
    expect(out.schema_not_json).toMatch(/^-1: schema: /);
    expect(out.schema_bad_type).toMatch(/^-1: schema: JSON schema conversion failed/);
    // a capacity of 0 asks for the length: the grammar's, not an error
    expect(Number(out.schema_length_only.split(":")[0])).toBeGreaterThan(100);
    // the process lived through all of it and computes exactly what it did before
    expect(out.same_logits_after).toBe("true");
    expect(out.cells_after_release).toBe("0");
  });
});
