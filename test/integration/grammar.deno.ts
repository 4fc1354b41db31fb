// Constrained decoding in the engine (llama.cpp's grammar sampler through the C API) on SmolLM2,
// native and WASM (CPU, in its worker as nodes run it): a JSON Schema converted by llama.cpp's
// converter, greedy decoding under its grammar until the end of generation on each engine, and
// the masks of both engines for the same logits (the grammar is integer work: equal, whatever
// the SIMD path); a bad grammar and a token the grammar refuses are errors that leave each
// engine working. Prints one JSON object; grammar.test.ts asserts on it.
import { Ajv } from "ajv";
import type { Grammar, RangeEngine } from "../../src/engine/range-engine.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { loadWasmEngine } from "../../server/engine/wasm/load.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";

const modelPath = defaultModelPath();
const schema = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 20 },
    sky: { enum: ["sunny", "cloudy", "rain"] },
    hours: { type: "array", items: { type: "integer" }, maxItems: 3 },
  },
  required: ["city", "sky", "hours"],
  additionalProperties: false,
};
const tok = await NativeTokenizer.load(modelPath);
const gbnf = tok.schemaGrammar(schema);
const prompt = tok.tokenize(
  tok.applyChat([{ role: "user", content: "The weather in Oslo, as JSON." }]),
  { addSpecial: true, parseSpecial: true },
);
const spec = { modelPath, kvCells: 512, maxSequences: 2, batchTokens: 512, threads: 1 };
const engines: Record<string, RangeEngine> = {
  native: await NativeEngine.load({ ...spec, range: "whole" }),
  wasm: await loadWasmEngine({ ...spec, range: "whole" }),
};
const validate = new Ajv().compile(schema);
const report: Record<string, unknown> = {};
const masks: Record<string, number[]> = {};
for (const [kind, e] of Object.entries(engines)) {
  const seq = e.openSequence();
  const g = await e.grammar({ gbnf });
  let input = prompt;
  const out: number[] = [];
  let maskMs = 0;
  let ended = false;
  for (let i = 0; i < 120 && !ended; i++) {
    const pos = Int32Array.from({ length: input.length }, (_, k) => e.nextPosition(seq) + k);
    const r = await e.decode({
      tokens: input,
      seq: new Int32Array(input.length).fill(seq),
      pos,
      outputs: Uint8Array.from({ length: input.length }, (_, k) => (k === input.length - 1 ? 1 : 0)),
    });
    const logits = r.data.slice(0, r.dim);
    const t0 = performance.now();
    await g.mask(logits);
    maskMs += performance.now() - t0;
    if (i === 0) masks[kind] = allowed(logits);
    let best = 0;
    for (let t = 1; t < logits.length; t++) if (logits[t] > logits[best]) best = t;
    await g.accept(best);
    if (tok.isEndOfGeneration(best)) ended = true;
    else out.push(best);
    input = Int32Array.from([best]);
  }
  const text = tok.detokenize(out);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  report[kind] = {
    text,
    ended,
    tokens: out.length,
    valid: parsed !== undefined && validate(parsed),
    mask_ms: maskMs / (out.length + 1),
    ...(await refusals(e, g)),
  };
  await g.close();
  await e.releaseSequence(seq);
}
report.first_mask = {
  native: masks.native.length,
  same: JSON.stringify(masks.native) === JSON.stringify(masks.wasm),
};
for (const e of Object.values(engines)) await e.close();
tok.close();
console.log(JSON.stringify(report));
Deno.exit(0);

function allowed(logits: Float32Array): number[] {
  const out: number[] = [];
  for (let t = 0; t < logits.length; t++) if (logits[t] !== -Infinity) out.push(t);
  return out;
}

/** A bad grammar, and a token the grammar does not allow: errors, and the engine goes on. */
async function refusals(e: RangeEngine, g: Grammar) {
  const bad = await e.grammar({ gbnf: 'root ::= "a" undefined-rule' }).then(
    () => "accepted",
    (err) => `${err.code}: ${err.message}`,
  );
  const tooBig = await e.grammar({ gbnf: "root ::= " + '"x" '.repeat(300_000) }).then(
    () => "accepted",
    (err) => err.code,
  );
  // after the whole answer only the end of generation is allowed: "{" is not
  const brace = tok.tokenize("{", { addSpecial: false, parseSpecial: false })[0];
  const refusedToken = await g.accept(brace).then(() => "accepted", (err) => `${err.code}: ${err.message}`);
  // still working: a fresh grammar masks, and the engine decodes
  const again = await e.grammar({ gbnf });
  const logits = new Float32Array(e.facts.nVocab);
  await again.mask(logits);
  await again.close();
  const seq = e.openSequence();
  const r = await e.decode({
    tokens: prompt.slice(0, 4),
    seq: new Int32Array(4).fill(seq),
    pos: Int32Array.from([0, 1, 2, 3]),
    outputs: Uint8Array.from([0, 0, 0, 1]),
  });
  await e.releaseSequence(seq);
  return {
    bad_grammar: bad,
    too_big: tooBig,
    refused_token: refusedToken,
    fresh_allowed: allowed(logits).length,
    decodes_after: r.rows,
  };
}
