// Text ↔ token ids and the model's chat template, from a vocab-only load.

export interface ChatMessage {
  readonly role: string;
  readonly content: string;
}

export interface SpecialTokens {
  readonly bos: number;
  readonly eos: number;
  readonly eot: number;
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
  checkGrammar(text: string): void;
  close(): void;
}
