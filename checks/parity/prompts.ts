// Parity prompts: chat-formatted texts of different lengths when the model has a chat
// template (the real model), seeded random token ids otherwise (synthetic models).
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

export function parityPrompts(tok: Tokenizer, count: number, seed = 7): Int32Array[] {
  if (tok.chatTemplate) {
    return Array.from(
      { length: count },
      (_, i) =>
        tok.tokenize(
          tok.applyChat([{ role: "user", content: PARITY_QUESTIONS[i % PARITY_QUESTIONS.length] }]),
          {
            addSpecial: true,
            parseSpecial: true,
          },
        ),
    );
  }
  let s = seed >>> 0;
  const rand = () => (s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32;
  return Array.from(
    { length: count },
    (_, i) => Int32Array.from({ length: 5 + 4 * i }, () => Math.floor(rand() * tok.nVocab)),
  );
}
