// Run by decode-turns.test.ts under Deno: the bench's one-session lanes in turns (the whole model,
// a route of 2, a route of 3, all open at once) on the real model, a few short rounds.
import { decodeTurns } from "../../checks/bench/decode-turns.ts";
import { evenSplit, parseSplit } from "../../src/engine/layer-range.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";

const t = await decodeTurns({
  modelPath: defaultModelPath(),
  nLayer: 30,
  backend: "cpu",
  threads: 1,
  promptTokens: 16,
  decodeTokens: 6,
  splits: [parseSplit("0:12,12:30", 30), evenSplit(30, 3)],
  rounds: 3,
});
console.log(JSON.stringify(t));
