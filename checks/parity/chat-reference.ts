// Whole-model llama.cpp's greedy answers to chat questions (the gateway's template and
// tokenization; plain completions for a base model), and where a generated text leaves one: the yardstick of the end-to-end
// tests that chat through routes.
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { wholeGreedy } from "../engine-host/whole-greedy.ts";

/** Four short questions with distinct answers, asked by the end-to-end tests. */
export const CHAT_QUESTIONS = [
  "What is the capital of France?",
  "List three prime numbers.",
  "Hi!",
  "What is 12 times 7?",
];

/** Eight, for tests that ask them all at once (the four above, then four more). */
export const EIGHT_QUESTIONS = [
  ...CHAT_QUESTIONS,
  "Name a color.",
  "Tell me a joke.",
  "Where is Peru?",
  "Count to five.",
];

export interface ChatReference {
  readonly texts: string[];
  /**
   * Where `text` leaves question q's greedy text: the first reference step whose text is no
   * longer a prefix, with the whole model's top-2 gap there. Batched decode is not
   * bit-identical, so a divergence is accepted only where the reference itself was within
   * 0.5 σ of choosing otherwise (the parity rule, src/parity/tolerance.ts).
   */
  divergence(q: number, text: string): { step: number; gapSigma: number; nearTie: boolean };
}

/** A conversation so far, as the chat API takes it. */
export type ChatMessages = ReadonlyArray<{ readonly role: string; readonly content: string }>;

/** questions: a user's question, or a whole conversation (chat models only). */
export async function chatReference(
  model: string,
  questions: ReadonlyArray<string | ChatMessages>,
  newTokens: number,
): Promise<ChatReference> {
  const tok = await NativeTokenizer.load(model);
  // as the gateway tokenizes: a chat request, or a completion for a model without a chat template
  const prompts = questions.map((q) =>
    tok.chatTemplate
      ? tok.tokenize(tok.applyChat(typeof q === "string" ? [{ role: "user", content: q }] : [...q]), {
        addSpecial: true,
        parseSpecial: true,
      })
      : tok.tokenize(String(q), { addSpecial: true, parseSpecial: false })
  );
  const refSteps = await wholeGreedy(model, prompts, newTokens, (t) => tok.isEndOfGeneration(t));
  const texts = refSteps.map((steps) =>
    tok.detokenize(steps.map((s) => s.token).filter((t) => !tok.isEndOfGeneration(t)))
  );

  const divergence = (q: number, text: string) => {
    const steps = refSteps[q];
    for (let k = 0; k < steps.length; k++) {
      const upTo = tok.detokenize(
        steps.slice(0, k + 1).map((s) => s.token).filter((t) => !tok.isEndOfGeneration(t)),
      );
      // at the reference's end of generation, the run diverged if it went on
      const diverged = tok.isEndOfGeneration(steps[k].token) ? text !== upTo : !text.startsWith(upTo);
      if (diverged) return { step: k, gapSigma: steps[k].gapSigma, nearTie: steps[k].gapSigma < 0.5 };
    }
    return { step: steps.length, gapSigma: -1, nearTie: false };
  };
  return { texts, divergence };
}
