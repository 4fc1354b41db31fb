// Tools in a model's own chat format (llama.cpp's chat machinery), on SmolLM2 with a template
// that knows tools (tool-template.ts). The plan: the template's prompt with the functions, its
// grammar (strict with `required`, lazy until a call starts with `auto`) and its parser. Then
// the engine under that grammar: past the start of a call (forced, as a model that chose to call
// would write it), greedy decoding must finish a call whose arguments follow the schema, which
// the template's parser reads back. Last, `strata up` serves it: an `auto` request and a tool
// result round trip through the gateway (the lazy grammar at the node). Prints one JSON object.
import { Ajv } from "ajv";
import OpenAI from "openai";
import { layerRange } from "../../src/engine/layer-range.ts";
import { planPrompt } from "../../src/gateway/prompt-plan.ts";
import { parseRequest } from "../../src/gateway/openai.ts";
import { choiceAnswer } from "../../src/gateway/responses.ts";
import type { Generated } from "../../src/gateway/generation.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { up } from "../../server/up/up.ts";
import { TOOL_TEMPLATE, withChatTemplate } from "./tool-template.ts";
import { WEATHER_TOOL, weatherRoundTrip } from "../../checks/samples/schemas.ts";

const dir = await Deno.makeTempDir({ prefix: "strata-tool-template-" });
const model = `${dir}/smollm2-tools.gguf`;
withChatTemplate(defaultModelPath(), model, TOOL_TEMPLATE);
const tok = await NativeTokenizer.load(model);
const plain = await NativeTokenizer.load(defaultModelPath());
const report: Record<string, unknown> = {
  template_knows_tools: !!tok.toolChat,
  smollm2_knows_tools: !!plain.toolChat,
};
plain.close();

const ask = (extra: Record<string, unknown>) =>
  parseRequest("chat", {
    model: "m",
    messages: [{ role: "user", content: "What is the weather like in Paris today?" }],
    tools: [WEATHER_TOOL],
    parallel_tool_calls: false,
    ...extra,
  });
const required = planPrompt(tok, ask({ tool_choice: "required" }));
const auto = planPrompt(tok, ask({ tool_choice: "auto" }));
const prompt = tok.detokenize(required.ids);
report.plan = {
  answer: required.answer.kind,
  prompt_lists_tools: prompt.includes("<tools>") && prompt.includes('"name": "get_weather"'),
  required_lazy: (required.grammar?.triggerPatterns?.length ?? 0) > 0,
  required_prefill: required.grammar?.prefill,
  generation_prompt: [...tok.tokenize("<|im_start|>assistant\n", { addSpecial: false, parseSpecial: true })],
  auto_triggers: auto.grammar?.triggerPatterns,
  stops: required.stops,
};
const roundTrip = planPrompt(
  tok,
  ask({
    tool_choice: "auto",
    messages: weatherRoundTrip('{"sky": "sunny"}'),
  }),
);
const rendered = tok.detokenize(roundTrip.ids);
report.round_trip_prompt = {
  call: rendered.includes(
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
  ),
  result: rendered.includes('<tool_response>\n{"sky": "sunny"}\n</tool_response>'),
};

// the engine under the template's strict grammar: the call's start forced, the rest greedy
const engine = await NativeEngine.load({
  modelPath: model,
  range: "whole",
  kvCells: 1024,
  maxSequences: 1,
  batchTokens: 512,
  threads: 1,
});
const g = required.grammar!;
const grammar = await engine.grammar(g);
for (const t of g.prefill ?? []) await grammar.accept(t);
const seq = engine.openSequence();
const forced = [...tok.tokenize("<tool_call>\n", { addSpecial: false, parseSpecial: false })];
let input = Int32Array.from([...required.ids, ...forced]);
for (const t of forced) await grammar.accept(t);
const out: number[] = [...forced];
for (let i = 0; i < 80; i++) {
  const n = input.length;
  const r = await engine.decode({
    tokens: input,
    seq: new Int32Array(n).fill(seq),
    pos: Int32Array.from({ length: n }, (_, k) => engine.nextPosition(seq) + k),
    outputs: Uint8Array.from({ length: n }, (_, k) => (k === n - 1 ? 1 : 0)),
  });
  const logits = r.data.slice(0, r.dim);
  await grammar.mask(logits);
  let best = 0;
  for (let t = 1; t < logits.length; t++) if (logits[t] > logits[best]) best = t;
  await grammar.accept(best);
  if (tok.isEndOfGeneration(best)) break;
  out.push(best);
  input = Int32Array.from([best]);
}
await grammar.close();
await engine.close();
const text = tok.detokenize(out);
const answer = choiceAnswer(
  { text, finishReason: "stop", logprobs: [] } as unknown as Generated,
  required.answer,
);
const call = answer.toolCalls?.[0];
report.decoded = {
  text,
  finish_reason: answer.finishReason,
  name: call?.name,
  calls: answer.toolCalls?.length ?? 0,
  valid: call ? new Ajv().compile(WEATHER_TOOL.function.parameters)(JSON.parse(call.arguments)) : false,
};
report.parse_plain = choiceAnswer(
  { text: "It is sunny.", finishReason: "stop", logprobs: [] } as unknown as Generated,
  required.answer,
);

// through `strata up`: the template's lazy grammar at the node, and a tool result in the prompt
const net = await up({
  model,
  split: [layerRange(0, 12), layerRange(12, 30)],
  routes: 1,
  backend: "cpu",
  threads: 1,
  gatewayListen: "127.0.0.1:0",
  apiKeys: [],
  leaseMs: 3000,
  dbPath: `${dir}/tracker.db`,
});
try {
  const client = new OpenAI({
    baseURL: `${net.gateway}/v1`,
    apiKey: "none",
    maxRetries: 0,
    timeout: 600_000,
  });
  const name = (await client.models.list()).data[0].id;
  const common = { model: name, tools: [WEATHER_TOOL], temperature: 0, max_tokens: 40 };
  const first = await client.chat.completions.create({
    ...common,
    messages: [{ role: "user", content: "What is the weather like in Paris today?" }],
  });
  const second = await client.chat.completions.create({
    ...common,
    messages: weatherRoundTrip('{"sky": "sunny", "temperature_c": 18}'),
  });
  report.served = {
    first: {
      finish_reason: first.choices[0].finish_reason,
      content: first.choices[0].message.content,
      prompt_tokens: first.usage?.prompt_tokens,
    },
    second: {
      finish_reason: second.choices[0].finish_reason,
      content: second.choices[0].message.content,
      prompt_tokens: second.usage?.prompt_tokens,
    },
    planned_prompt_tokens: [auto.ids.length, roundTrip.ids.length],
  };
} finally {
  await net.stop();
  tok.close();
  await Deno.remove(dir, { recursive: true });
}
console.log(JSON.stringify(report));
Deno.exit(0);
