// The suite's small case of `strata bench long-context`: `strata up` with its defaults, a chat
// of 1,500 prompt tokens (three times what a session held before the one KV pool) against
// whole-model llama.cpp, and 4 streamed chats of 700 prompt tokens at once against themselves
// alone. Prints one JSON object; long-context.test.ts asserts on it.
import { benchLongContext } from "../../checks/bench/long-context.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";

const out = await benchLongContext({
  modelPath: defaultModelPath(),
  modelName: "smollm2",
  longTokens: 1500,
  concurrent: 4,
  concurrentTokens: 700,
  maxTokens: 16,
});
console.log(JSON.stringify(out));
Deno.exit(0);
