// A model and split opened as `strata parity` reads them, for it and for the sweep: the split is
// held to the architecture's cut rule (a refused split throws with the reason before any engine
// loads), and prompts are text unless the model is synthetic (its vocabulary is random).
import { parseSplit } from "../../src/engine/layer-range.ts";
import { cutRule } from "../../src/gguf/cut-points.ts";
import { isSynthetic } from "../../src/model/synth.ts";
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { fileFacts } from "../../server/model/facts.ts";

/** The caller closes the tokenizer. */
export async function openParityModel(path: string, splitText: string, minTokens: number) {
  const tokenizer = await NativeTokenizer.load(path);
  try {
    const facts = await fileFacts(path);
    const prompts = { text: !isSynthetic(facts.header), minTokens };
    const split = parseSplit(splitText, facts.nLayer, cutRule(facts.header));
    return { tokenizer, facts, prompts, split };
  } catch (e) {
    tokenizer.close();
    throw e;
  }
}
