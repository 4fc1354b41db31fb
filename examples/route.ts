// The whole engine API in one short file: two shards of SmolLM2, one generation, each token
// drawn by the sampler every route's last shard uses (greedy unless asked).
// Run: ./node_modules/.bin/deno run -A examples/route.ts "What is the capital of France?" [temperature] [seed]
import { layerRange } from "../src/engine/layer-range.ts";
import { choose, type Policy } from "../src/sampling/sampler.ts";
import { NativeEngine } from "../server/engine/native/native-engine.ts";
import { NativeTokenizer } from "../server/engine/native/native-tokenizer.ts";
import { fetchDefaultModel } from "../server/model/fetch.ts";

const [question = "What is the capital of France?", temperature = "0", seed = "0"] = Deno.args;
const policy: Policy = { temperature: Number(temperature), topK: 0, topP: 1, seed: BigInt(seed) };

const modelPath = await fetchDefaultModel();
const tok = await NativeTokenizer.load(modelPath);
const spec = { modelPath, kvCells: 1024, maxSequences: 1, batchTokens: 512, threads: 2 };
const head = await NativeEngine.load({ ...spec, range: layerRange(0, 12) }); // tokens → hidden
const tail = await NativeEngine.load({ ...spec, range: layerRange(12, 30) }); // hidden → logits
const [a, b] = [head.openSequence(), tail.openSequence()];

let input = tok.tokenize(tok.applyChat([{ role: "user", content: question }]), {
  addSpecial: true,
  parseSpecial: true,
});
for (let step = 0; step < 64; step++) {
  const n = input.length;
  const pos = Int32Array.from({ length: n }, (_, i) => head.nextPosition(a) + i);
  const hidden = await head.decode({ tokens: input, seq: new Int32Array(n).fill(a), pos });
  const outputs = new Uint8Array(n).fill(0, 0, n - 1).fill(1, n - 1);
  const logits = await tail.decode({ hidden: hidden.data, seq: new Int32Array(n).fill(b), pos, outputs });
  const next = choose(logits.data, policy, pos[n - 1]).token;
  if (tok.isEndOfGeneration(next)) break;
  await Deno.stdout.write(new TextEncoder().encode(tok.piece(next)));
  input = Int32Array.of(next);
}
console.log();
await Promise.all([head.close(), tail.close()]);
tok.close();
