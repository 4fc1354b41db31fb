// Text ↔ token ids and the model's chat template, from a vocab-only load.
import type { GrammarSpec } from "./range-engine.ts";

export interface ChatMessage {
  readonly role: string;
  readonly content: string;
}

export interface SpecialTokens {
  readonly bos: number;
  readonly eos: number;
  readonly eot: number;
}

/** llama.cpp's chat machinery for a template that knows tools (common/chat.cpp). */
export interface ToolChat {
  /** The conversation with its tools (OpenAI's shapes), as the template renders it. */
  apply(request: {
    messages: unknown[];
    tools: unknown[];
    tool_choice: string;
    parallel_tool_calls: boolean;
  }): ToolPrompt;
  /** An answer read with the parser `apply` gave. */
  parse(
    parser: string,
    text: string,
  ): { content: string; toolCalls: Array<{ name: string; arguments: string }> };
}

export interface ToolPrompt {
  readonly prompt: string;
  /** empty gbnf: the answer is free */
  readonly grammar: { gbnf: string; triggerPatterns: string[]; triggerTokens: number[]; prefill: number[] };
  /** more stop strings the format ends an answer with */
  readonly stops: string[];
  /** texts of special tokens the answer must keep (the format's tags) */
  readonly preserved: string[];
  /** for parse */
  readonly parser: string;
}

export interface Tokenizer {
  readonly nVocab: number;
  readonly special: SpecialTokens;
  tokenize(text: string, opts?: { addSpecial?: boolean; parseSpecial?: boolean }): Int32Array;
  piece(token: number): string;
  detokenize(tokens: ArrayLike<number>): string;
  isEndOfGeneration(token: number): boolean;
  /** The GGUF's chat template text, or undefined when it has none. */
  readonly chatTemplate: string | undefined;
  /** Formats a conversation with the model's template, ending with the assistant's turn. */
  applyChat(messages: readonly ChatMessage[]): string;
  /**
   * A JSON Schema as a GBNF grammar, by llama.cpp's converter: EngineError bad_input with the
   * reason when it cannot convert it.
   */
  schemaGrammar(schema: unknown): string;
  /** Refuses (EngineError bad_input) a grammar llama.cpp cannot use over this vocabulary. */
  checkGrammar(spec: GrammarSpec): void;
  /** Tool calling in the model's own format, where its chat template describes tools. */
  readonly toolChat?: ToolChat;
  close(): void;
}
