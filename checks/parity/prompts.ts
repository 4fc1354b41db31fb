// Parity prompts: chat-formatted texts of different lengths when the model has a chat
// template, the same questions as plain text for a real base model, and seeded random token
// ids for synthetic models (their vocabulary is random: text means nothing to them).
import type { Tokenizer } from "../../src/engine/tokenizer.ts";

export const PARITY_QUESTIONS = [
  "What is the capital of France?",
  "Write a haiku about the sea.",
  "Explain in one sentence why the sky is blue, and name the scattering that causes it.",
  "List three prime numbers.",
  "Tell me a short story about a robot who learns to paint, in two sentences.",
  "Hi!",
  "Translate 'good morning' into Spanish and French.",
  "What is 12 times 7?",
];

export interface PromptOptions {
  /** no chat template: the questions as plain text (a real base model), not random ids */
  readonly text?: boolean;
  /** each prompt at least this long (a question repeated, or more random ids): a test can run
   *  past a sliding window */
  readonly minTokens?: number;
  readonly seed?: number;
}

export function parityPrompts(tok: Tokenizer, count: number, o: PromptOptions = {}): Int32Array[] {
  const min = o.minTokens ?? 0;
  if (tok.chatTemplate || o.text) {
    // lengths differ from prompt to prompt (a batch mixes them): a question repeats once more
    // when its length is taken
    const lengths = new Set<number>();
    return Array.from({ length: count }, (_, i) => {
      const question = PARITY_QUESTIONS[i % PARITY_QUESTIONS.length];
      for (let repeat = 1;; repeat++) {
        const content = Array(repeat).fill(question).join(" ");
        const ids = tok.chatTemplate
          ? tok.tokenize(tok.applyChat([{ role: "user", content }]), { addSpecial: true, parseSpecial: true })
          : tok.tokenize(content, { addSpecial: true, parseSpecial: false });
        if (ids.length >= min && (min === 0 || !lengths.has(ids.length))) {
          lengths.add(ids.length);
          return ids;
        }
      }
    });
  }
  let s = (o.seed ?? 7) >>> 0;
  const rand = () => (s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32;
  return Array.from(
    { length: count },
    (_, i) =>
      Int32Array.from({ length: Math.max(5 + 4 * i, min + i) }, () => Math.floor(rand() * tok.nVocab)),
  );
}
