// Tokenizer and chat template from a vocab-only load of the GGUF.
import { concatBytes } from "../../../src/bytes/concat.ts";
import { EngineError } from "../../../src/engine/errors.ts";
import type { ChatMessage, SpecialTokens, Tokenizer } from "../../../src/engine/tokenizer.ts";
import { ensureNativeLibrary } from "./build.ts";
import { cstr, ErrorBuffer, handleError, openStrata, readString, type StrataLib } from "./ffi.ts";
import { modelFacts } from "../../../src/engine/strata-engine.ts";
import { FfiCalls } from "./ffi-calls.ts";
import { loadModel } from "./native-engine.ts";

export class NativeTokenizer implements Tokenizer {
  readonly nVocab: number;
  readonly special: SpecialTokens;
  readonly chatTemplate: string | undefined;

  private constructor(private readonly lib: StrataLib, private readonly model: Deno.PointerObject) {
    this.nVocab = modelFacts(new FfiCalls(lib), model).nVocab;
    const s = new Int32Array(3);
    lib.strata_special_tokens(model, s, 3);
    this.special = { bos: s[0], eos: s[1], eot: s[2] };
    const t = readString((b, c) => lib.strata_chat_template(model, b, c));
    this.chatTemplate = t === "" ? undefined : t;
  }

  static async load(path: string): Promise<NativeTokenizer> {
    const lib = openStrata(await ensureNativeLibrary("cpu"));
    return new NativeTokenizer(lib, await loadModel(new FfiCalls(lib), path, "whole", 0, true));
  }

  tokenize(text: string, opts: { addSpecial?: boolean; parseSpecial?: boolean } = {}): Int32Array {
    const bytes = new TextEncoder().encode(text);
    let out = new Int32Array(bytes.length + 8);
    for (;;) {
      const n = this.lib.strata_tokenize(
        this.model,
        bytes,
        bytes.length,
        opts.addSpecial ? 1 : 0,
        opts.parseSpecial ? 1 : 0,
        out,
        out.length,
      );
      if (n < 0) throw new EngineError("bad_input", handleError(this.lib, { model: this.model }));
      if (n <= out.length) return out.slice(0, n);
      out = new Int32Array(n);
    }
  }

  piece(token: number): string {
    return new TextDecoder().decode(this.#pieceBytes(token));
  }

  detokenize(tokens: ArrayLike<number>): string {
    // join bytes before decoding: one character may span several tokens
    const parts = Array.from(tokens, (t) => this.#pieceBytes(t));
    return new TextDecoder().decode(concatBytes(parts));
  }

  isEndOfGeneration(token: number): boolean {
    return this.lib.strata_token_is_eog(this.model, token) === 1;
  }

  applyChat(messages: readonly ChatMessage[]): string {
    if (!this.chatTemplate) throw new EngineError("bad_input", "the model carries no chat template");
    const enc = new TextEncoder();
    const packed = messages.flatMap((m) => [enc.encode(m.role + "\0"), enc.encode(m.content + "\0")]);
    const msgs = new Uint8Array(packed.reduce((n, p) => n + p.length, 0));
    let o = 0;
    for (const p of packed) {
      msgs.set(p, o);
      o += p.length;
    }
    const tmpl = cstr(this.chatTemplate);
    let cap = 1024;
    for (;;) {
      const buf = new Uint8Array(cap);
      const err = new ErrorBuffer();
      const n = this.lib.strata_chat_apply(
        tmpl,
        msgs,
        msgs.length,
        messages.length,
        1,
        buf,
        cap,
        err.buf,
        err.cap,
      );
      if (n < 0) throw new EngineError("bad_input", err.message);
      if (n < cap) return new TextDecoder().decode(buf.subarray(0, n));
      cap = n + 1;
    }
  }

  schemaGrammar(schema: unknown): string {
    const bytes = new TextEncoder().encode(JSON.stringify(schema));
    let cap = 4096;
    for (;;) {
      const buf = new Uint8Array(cap);
      const err = new ErrorBuffer();
      const n = this.lib.strata_json_schema_grammar(bytes, bytes.length, buf, cap, err.buf, err.cap);
      if (n < 0) throw new EngineError("bad_input", err.message);
      if (n < cap) return new TextDecoder().decode(buf.subarray(0, n));
      cap = n + 1;
    }
  }

  checkGrammar(text: string): void {
    const calls = new FfiCalls(this.lib);
    const made = calls.grammarNew(this.model, text);
    if (made.handle === null) throw new EngineError("bad_input", made.error || "the grammar was refused");
    calls.grammarFree(made.handle);
  }

  close(): void {
    this.lib.strata_model_free(this.model);
  }

  #pieceBytes(token: number): Uint8Array {
    let buf = new Uint8Array(64);
    for (;;) {
      const n = this.lib.strata_token_piece(this.model, token, buf, buf.length);
      if (n < 0) throw new EngineError("bad_input", handleError(this.lib, { model: this.model }));
      if (n <= buf.length) return buf.slice(0, n);
      buf = new Uint8Array(n);
    }
  }
}
