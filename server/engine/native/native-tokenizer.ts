// Tokenizer and chat template from a vocab-only load of the GGUF.
import { concatBytes } from "../../../src/bytes/concat.ts";
import { EngineError } from "../../../src/engine/errors.ts";
import type { Grammar, GrammarSpec } from "../../../src/engine/range-engine.ts";
import type {
  ChatMessage,
  SpecialTokens,
  Tokenizer,
  ToolChat,
  ToolPrompt,
} from "../../../src/engine/tokenizer.ts";
import { ensureNativeLibrary } from "../../build/native.ts";
import { cstr, ErrorBuffer, handleError, openStrata, readString, type StrataLib } from "./ffi.ts";
import { CallsGrammar, modelFacts } from "../../../src/engine/strata-engine.ts";
import { FfiCalls } from "./ffi-calls.ts";
import { loadModel } from "./native-engine.ts";

export class NativeTokenizer implements Tokenizer {
  readonly nVocab: number;
  readonly special: SpecialTokens;
  readonly chatTemplate: string | undefined;
  readonly toolChat?: ToolChat;

  private constructor(private readonly lib: StrataLib, private readonly model: Deno.PointerObject) {
    this.nVocab = modelFacts(new FfiCalls(lib), model).nVocab;
    const s = new Int32Array(3);
    lib.strata_special_tokens(model, s, 3);
    this.special = { bos: s[0], eos: s[1], eot: s[2] };
    const t = readString((b, c) => lib.strata_chat_template(model, b, c));
    this.chatTemplate = t === "" ? undefined : t;
    this.toolChat = this.chatTemplate ? NativeToolChat.open(lib, model) : undefined;
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
    return grown((buf, cap, err) =>
      this.lib.strata_chat_apply(tmpl, msgs, msgs.length, messages.length, 1, buf, cap, err.buf, err.cap)
    );
  }

  schemaGrammar(schema: unknown): string {
    const convert = this.lib.strata_json_schema_grammar;
    if (!convert) throw new EngineError("bad_input", "this engine build has no JSON Schema converter");
    const bytes = new TextEncoder().encode(JSON.stringify(schema));
    return grown((buf, cap, err) => convert(bytes, bytes.length, buf, cap, err.buf, err.cap));
  }

  /** llama.cpp's grammar over this vocabulary (a yardstick's; nodes use their engine's). */
  grammar(spec: GrammarSpec): Grammar {
    const calls = new FfiCalls(this.lib);
    const made = calls.grammarNew(this.model, spec);
    if (made.handle === null) throw new EngineError("bad_input", made.error || "the grammar was refused");
    return new CallsGrammar(calls, made.handle);
  }

  checkGrammar(spec: GrammarSpec): void {
    void this.grammar(spec).close();
  }

  close(): void {
    (this.toolChat as NativeToolChat | undefined)?.close();
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

/** A call that writes text into a buffer and its reason into an error buffer: grown until it fits. */
function grown(call: (buf: Uint8Array, cap: number, err: ErrorBuffer) => number): string {
  let cap = 64 * 1024;
  for (;;) {
    const buf = new Uint8Array(cap);
    const err = new ErrorBuffer();
    const n = call(buf, cap, err);
    if (n < 0) throw new EngineError("bad_input", err.message);
    if (n < cap) return new TextDecoder().decode(buf.subarray(0, n));
    cap = n + 1;
  }
}

/** llama.cpp's chat machinery over the model's template, where the template knows tools. */
class NativeToolChat implements ToolChat {
  private constructor(private readonly lib: StrataLib, private readonly chat: Deno.PointerObject) {}

  /** undefined where the build has no chat machinery or the template does not describe tools */
  static open(lib: StrataLib, model: Deno.PointerObject): NativeToolChat | undefined {
    if (!lib.strata_chat_new || !lib.strata_chat_caps || !lib.strata_chat_free) return undefined;
    const err = new ErrorBuffer();
    const chat = lib.strata_chat_new(model, err.buf, err.cap);
    if (!chat) return undefined;
    const caps = JSON.parse(readString((b, c) => lib.strata_chat_caps!(chat, b, c)) || "{}");
    if (caps.supports_tool_calls) return new NativeToolChat(lib, chat);
    lib.strata_chat_free(chat);
    return undefined;
  }

  apply(request: Parameters<ToolChat["apply"]>[0]): ToolPrompt {
    const bytes = new TextEncoder().encode(JSON.stringify(request));
    const o = JSON.parse(
      grown((buf, cap, err) =>
        this.lib.strata_chat_apply_tools!(this.chat, bytes, bytes.length, buf, cap, err.buf, err.cap)
      ),
    );
    return {
      prompt: o.prompt,
      grammar: {
        gbnf: o.grammar,
        triggerPatterns: o.lazy ? o.trigger_patterns : [],
        triggerTokens: o.lazy ? o.trigger_tokens : [],
        prefill: o.prefill,
      },
      stops: o.additional_stops,
      preserved: o.preserved_tokens,
      parser: JSON.stringify(o.parser),
    };
  }

  close(): void {
    this.lib.strata_chat_free!(this.chat);
  }

  parse(parser: string, text: string) {
    const p = new TextEncoder().encode(parser);
    const t = new TextEncoder().encode(text);
    const o = JSON.parse(
      grown((buf, cap, err) =>
        this.lib.strata_chat_parse!(p, p.length, t, t.length, buf, cap, err.buf, err.cap)
      ),
    );
    return {
      content: o.content as string,
      toolCalls: (o.tool_calls as Array<{ name: string; arguments: string }>).map((c) => ({
        name: c.name,
        arguments: c.arguments,
      })),
    };
  }
}
