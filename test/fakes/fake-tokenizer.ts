// A tokenizer for the fake engine's 32-token vocabulary: letters, a space, a full stop, and the
// two bytes of "é" as tokens of their own, so a character can be split across tokens as real
// byte-level vocabularies split them.
import { EngineError } from "../../src/engine/errors.ts";
import type { GrammarSpec } from "../../src/engine/range-engine.ts";
import type { ChatMessage, Tokenizer } from "../../src/engine/tokenizer.ts";

export const BOS = 30, EOS = 31;
/** the first and second byte of "é" (0xC3 0xA9) */
export const E_ACUTE_HEAD = 26, E_ACUTE_TAIL = 27;

const bytesOf = (t: number): number[] =>
  t < 26
    ? [0x61 + t]
    : t === E_ACUTE_HEAD
    ? [0xc3]
    : t === E_ACUTE_TAIL
    ? [0xa9]
    : t === 28
    ? [0x20]
    : t === 29
    ? [0x2e]
    : [];

export class FakeTokenizer implements Tokenizer {
  readonly nVocab = 32;
  readonly special = { bos: BOS, eos: EOS, eot: EOS };
  readonly chatTemplate = "role: content";

  tokenize(text: string, opts: { addSpecial?: boolean } = {}): Int32Array {
    const out: number[] = opts.addSpecial ? [BOS] : [];
    for (const ch of text) {
      const c = ch.toLowerCase();
      if (c >= "a" && c <= "z") out.push(c.charCodeAt(0) - 0x61);
      else if (c === "é") out.push(E_ACUTE_HEAD, E_ACUTE_TAIL);
      else if (c === ".") out.push(29);
      else out.push(28);
    }
    return Int32Array.from(out);
  }

  piece(token: number): string {
    return this.detokenize([token]);
  }

  detokenize(tokens: ArrayLike<number>): string {
    return new TextDecoder().decode(Uint8Array.from(Array.from(tokens).flatMap(bytesOf)));
  }

  isEndOfGeneration(token: number): boolean {
    return token === EOS;
  }

  applyChat(messages: readonly ChatMessage[]): string {
    return messages.map((m) => `${m.role} ${m.content}.`).join(" ") + " assistant ";
  }

  /** The fake's grammars are the fake engine's ("allow <ids>"): a schema has none. */
  schemaGrammar(): string {
    throw new EngineError("bad_input", "the fake tokenizer converts no JSON Schema");
  }

  checkGrammar(spec: GrammarSpec): void {
    if (!/^allow( \d+)+$/.test(spec.gbnf)) {
      throw new EngineError("bad_input", `not a fake grammar: ${spec.gbnf}`);
    }
  }

  close(): void {}
}
