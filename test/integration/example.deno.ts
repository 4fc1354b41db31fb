// Run by example.test.ts under Deno: examples/route.ts as a user runs it, beside whole-model
// llama.cpp's greedy answer to the same question. Prints one JSON object.
import { chatReference } from "../../checks/parity/chat-reference.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";

const question = "What is the capital of France?";
const out = await new Deno.Command(Deno.execPath(), {
  args: ["run", "-A", "--quiet", new URL("../../examples/route.ts", import.meta.url).pathname, question],
  stdout: "piped",
  stderr: "piped",
}).output();
const text = new TextDecoder().decode(out.stdout).replace(/\n$/, "");
const ref = await chatReference(defaultModelPath(), [question], 64);
console.log(JSON.stringify({
  code: out.code,
  stderr: new TextDecoder().decode(out.stderr).slice(-2000),
  text,
  reference: ref.texts[0],
  divergence: ref.divergence(0, text),
}));
