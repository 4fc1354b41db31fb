// Deno FFI symbols of the flat C API (vendor/llama.cpp/api/strata.h). Loads, context
// creation and decode are nonblocking: they run on a worker thread and return a Promise,
// so the event loop that carries seams never waits on the engine.
export const SYMBOLS = {
  strata_model_error: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  strata_ctx_error: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  strata_log_level: { parameters: ["i32"], result: "void" },
  strata_backends: { parameters: ["buffer", "i32"], result: "i32" },
  strata_file_arch: { parameters: ["buffer", "buffer", "i32", "buffer", "i32"], result: "i32" },
  strata_model_load: {
    parameters: ["buffer", "i32", "i32", "i32", "i32", "buffer", "i32"],
    result: "pointer",
    nonblocking: true,
  },
  strata_model_free: { parameters: ["pointer"], result: "void" },
  strata_model_facts: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  strata_model_arch: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  strata_tokenize: { parameters: ["pointer", "buffer", "i32", "i32", "i32", "buffer", "i32"], result: "i32" },
  strata_token_piece: { parameters: ["pointer", "i32", "buffer", "i32"], result: "i32" },
  strata_token_is_eog: { parameters: ["pointer", "i32"], result: "i32" },
  strata_special_tokens: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  strata_chat_template: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  strata_chat_apply: {
    parameters: ["buffer", "buffer", "i32", "i32", "i32", "buffer", "i32", "buffer", "i32"],
    result: "i32",
  },
  strata_ctx_new: {
    parameters: ["pointer", "i32", "i32", "i32", "i32", "i32", "buffer", "i32"],
    result: "pointer",
    nonblocking: true,
  },
  strata_ctx_free: { parameters: ["pointer"], result: "void" },
  strata_ctx_threads: { parameters: ["pointer", "i32"], result: "i32" },
  strata_decode: {
    // ctx, n_tokens, then each array with its element count
    parameters: [
      "pointer",
      "i32",
      "buffer",
      "i32",
      "buffer",
      "i32",
      "buffer",
      "i32",
      "buffer",
      "i32",
      "buffer",
      "i32",
    ],
    result: "i32",
    nonblocking: true,
  },
  strata_output_dim: { parameters: ["pointer"], result: "i32" },
  strata_outputs: { parameters: ["pointer", "buffer", "i64"], result: "i64" },
  strata_seq_release: { parameters: ["pointer", "i32"], result: "i32" },
  strata_seq_trim: { parameters: ["pointer", "i32", "i32"], result: "i32" },
  strata_seq_copy: { parameters: ["pointer", "i32", "i32", "i32"], result: "i32" },
  strata_seq_state_size: { parameters: ["pointer", "i32"], result: "i64" },
  strata_seq_state_get: { parameters: ["pointer", "i32", "buffer", "i64"], result: "i64" },
  strata_seq_state_set: { parameters: ["pointer", "i32", "buffer", "i64"], result: "i32" },
  strata_seq_pos_max: { parameters: ["pointer", "i32"], result: "i32" },
  strata_ctx_stats: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  strata_ctx_last_passes: { parameters: ["pointer"], result: "i32" },
  strata_keep_awake: { parameters: ["i32"], result: "i32" },
  strata_ctx_capture: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  strata_ctx_captured: { parameters: ["pointer", "i32", "buffer", "i64"], result: "i64" },
  strata_grammar_new: {
    parameters: ["pointer", "buffer", "i32", "buffer", "i32", "i32", "buffer", "i32", "buffer", "i32"],
    result: "pointer",
  },
  strata_grammar_free: { parameters: ["pointer"], result: "void" },
  strata_grammar_error: { parameters: ["pointer", "buffer", "i32"], result: "i32" },
  // a vocabulary's worth of pieces against the grammar (milliseconds): off the event loop
  strata_grammar_apply: { parameters: ["pointer", "buffer", "i32"], result: "i32", nonblocking: true },
  strata_grammar_accept: { parameters: ["pointer", "i32"], result: "i32" },
  // STRATA_CHAT only (a sanitizer build leaves them out)
  strata_json_schema_grammar: {
    parameters: ["buffer", "i32", "buffer", "i32", "buffer", "i32"],
    result: "i32",
    optional: true,
  },
  strata_chat_new: { parameters: ["pointer", "buffer", "i32"], result: "pointer", optional: true },
  strata_chat_free: { parameters: ["pointer"], result: "void", optional: true },
  strata_chat_caps: { parameters: ["pointer", "buffer", "i32"], result: "i32", optional: true },
  strata_chat_apply_tools: {
    parameters: ["pointer", "buffer", "i32", "buffer", "i32", "buffer", "i32"],
    result: "i32",
    optional: true,
  },
  strata_chat_parse: {
    parameters: ["buffer", "i32", "buffer", "i32", "buffer", "i32", "buffer", "i32"],
    result: "i32",
    optional: true,
  },
} as const satisfies Deno.ForeignLibraryInterface;

export type StrataLib = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

const opened = new Map<string, StrataLib>();

export function openStrata(path: string): StrataLib {
  let lib = opened.get(path);
  if (!lib) {
    lib = Deno.dlopen(path, SYMBOLS).symbols;
    const level =
      { none: 0, error: 1, warn: 2, info: 3, debug: 4 }[Deno.env.get("STRATA_ENGINE_LOG") ?? "none"] ?? 0;
    lib.strata_log_level(level);
    opened.set(path, lib);
  }
  return lib;
}

/** The last error of one model or context (each keeps its own). */
export function handleError(
  lib: StrataLib,
  handle: { model: Deno.PointerObject } | { ctx: Deno.PointerObject },
): string {
  return readString((b, c) =>
    "model" in handle ? lib.strata_model_error(handle.model, b, c) : lib.strata_ctx_error(handle.ctx, b, c)
  ) || "unknown engine error";
}

/** A buffer for the error of a call without a handle (loads, chat templates). */
export class ErrorBuffer {
  readonly buf = new Uint8Array(2048);
  readonly cap = this.buf.length;
  get message(): string {
    const end = this.buf.indexOf(0);
    return new TextDecoder().decode(this.buf.subarray(0, end < 0 ? this.buf.length : end)) ||
      "unknown engine error";
  }
}

export const cstr = (s: string): Uint8Array => new TextEncoder().encode(s + "\0");

/** Calls fn with a growing byte buffer until the C side's string fits. */
export function readString(fn: (buf: Uint8Array, cap: number) => number): string {
  let cap = 256;
  for (;;) {
    const buf = new Uint8Array(cap);
    const n = fn(buf, cap);
    if (n < 0) return "";
    if (n < cap) return new TextDecoder().decode(buf.subarray(0, n));
    cap = n + 1;
  }
}
