// The OpenAI API beyond plain chat, through the official `openai` npm client on `strata up`
// (route of 2) against whole-model llama.cpp: logprobs (streamed and not) equal to the
// log-softmax of the whole model's logits; logit_bias -100 bans a token; n = 3 with a seed,
// each choice equal to its own seed alone; a streamed request past the context gets its 400
// before any stream byte; an unsupported field is a 400 that names it; a get_weather tool round
// trip; json_schema answers that validate (16 at once equal to each alone); /tokenize, /detokenize,
// /v1/models' capacity; /health 200, then 503 once a node is gone. Prints one JSON object;
// openai-api.test.ts asserts on it.
import { Ajv } from "ajv";
import { PERSON_SCHEMA, WEATHER_TOOL } from "../../checks/samples/schemas.ts";
import { strataCli } from "./strata-cli.ts";
import OpenAI from "openai";
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { wholeGreedy } from "../../checks/engine-host/whole-greedy.ts";
import { openaiVenv } from "./openai-venv.ts";

const KEY = "test-key";
const MAX = 8;
const model = defaultModelPath();
const tok = await NativeTokenizer.load(model);
const question = "What is the capital of France?";
const messages = [{ role: "user" as const, content: question }];
const ids = tok.tokenize(tok.applyChat(messages), { addSpecial: true, parseSpecial: true });
const isEnd = (t: number) => tok.isEndOfGeneration(t);
const [whole] = await wholeGreedy(model, [ids], MAX, isEnd);
const banned = whole[0].token;
const [wholeBanned] = await wholeGreedy(model, [ids], MAX, isEnd, { banned });
const textOf = (steps: typeof whole) => tok.detokenize(steps.map((s) => s.token).filter((t) => !isEnd(t)));

const net = await ServiceProcess.start(
  "strata up",
  ["up", "--port", "0", "--api-key", KEY, "--lease-ms", "3000"],
  {},
  600_000,
);
const gw = String(net.ready.gateway);
const nodes = net.ready.nodes as Array<{ name: string; pid: number }>;
const client = new OpenAI({ baseURL: `${gw}/v1`, apiKey: KEY, maxRetries: 0, timeout: 600_000 });
const auth = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
const report: Record<string, unknown> = {};
try {
  const base = { model: "smollm2", messages, temperature: 0, max_tokens: MAX };

  // 1. logprobs, greedy: each step's token, its logprob, its top 5; and streamed
  const lp = await client.chat.completions.create({ ...base, logprobs: true, top_logprobs: 5 });
  const content = lp.choices[0].logprobs?.content ?? [];
  const stream = await client.chat.completions.create({
    ...base,
    logprobs: true,
    top_logprobs: 5,
    stream: true,
  });
  const streamed: typeof content = [];
  for await (const c of stream) streamed.push(...(c.choices[0]?.logprobs?.content ?? []));
  report.logprobs = {
    text: lp.choices[0].message.content,
    whole_text: textOf(whole),
    steps: content.map((c, i) => ({
      token: c.token,
      whole_token: tok.piece(whole[i]?.token ?? -1),
      logprob: c.logprob,
      // the node sends a float32: the whole model's value rounded the same way
      whole_logprob: whole[i] ? Math.fround(whole[i].logprob) : null,
      top: c.top_logprobs.map((t) => [t.token, t.logprob]),
    })),
    streamed_same: JSON.stringify(streamed) === JSON.stringify(content),
  };

  // 2. logit_bias -100 on the first token of the greedy answer
  const biased = await client.chat.completions.create({ ...base, logit_bias: { [banned]: -100 } });
  report.logit_bias = {
    banned: tok.piece(banned),
    text: biased.choices[0].message.content,
    whole_text: textOf(wholeBanned),
    plain_text: textOf(whole),
  };

  // 3. n = 3 with a seed: choice i equals the same request alone with seed + i
  const sampled = { model: "smollm2", messages, temperature: 1, max_tokens: 12 };
  const three = await client.chat.completions.create({ ...sampled, n: 3, seed: 7 });
  const alone = await Promise.all(
    [7, 8, 9].map(async (seed) =>
      (await client.chat.completions.create({ ...sampled, seed })).choices[0].message.content
    ),
  );
  report.n = { choices: three.choices.map((c) => [c.index, c.message.content]), alone };

  // 4. a streamed request past the context: a 400 before any stream byte
  const past = await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ ...base, max_tokens: 10_000_000, stream: true }),
  });
  report.stream_past_context = {
    status: past.status,
    content_type: past.headers.get("content-type"),
    body: await past.json(),
  };

  // 5. a field that would change the answer and is not honoured
  const refused = await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ ...base, functions: [{ name: "f", parameters: { type: "object" } }] }),
  });
  report.unsupported = { status: refused.status, param: (await refused.json()).error?.param };

  // 5a. a tool round trip: get_weather's call (not streamed, then streamed), its result, the answer
  report.tools = await toolRoundTrip();

  // 5b. response_format json_schema, strict: 20 seeded answers at temperature 1, each alone;
  // then 16 of them at once (batched at the nodes), which must not change a byte
  report.json_schema = await jsonSchemaAnswers();

  // 6. tokens both ways, and what the network offers
  const tokenized = await (await fetch(`${gw}/tokenize`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ content: question }),
  })).json();
  const detokenized = await (await fetch(`${gw}/detokenize`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ tokens: tokenized.tokens }),
  })).json();
  report.tokenize = {
    tokens: tokenized.tokens,
    ours: [...tok.tokenize(question, { addSpecial: false, parseSpecial: false })],
    content: detokenized.content,
  };
  report.models = (await client.models.list()).data;

  // 7. the same through the Python package, installed with pip into a cached virtualenv
  report.python = await pythonSdk(gw);

  // 7a. `strata status` against the gateway: the operator's view
  report.status = {
    text: await strataCli(["status", "--url", gw]),
    json: JSON.parse(await strataCli(["status", "--url", gw, "--json"])),
  };

  // 8. /health while the route is complete, then with a node gone
  const healthy = await fetch(`${gw}/health`);
  report.health_up = { status: healthy.status, body: await healthy.json() };
  Deno.kill(nodes[0].pid, "SIGKILL");
  let down = { status: 0, body: {} as unknown };
  for (const t0 = Date.now(); Date.now() - t0 < 30_000; await new Promise((r) => setTimeout(r, 500))) {
    const h = await fetch(`${gw}/health`);
    down = { status: h.status, body: await h.json() };
    if (h.status === 503) break;
  }
  report.health_down = down;
} finally {
  await net.stop();
  tok.close();
}
console.log(JSON.stringify(report));
Deno.exit(0);

/** get_weather called (tool_choice required, one call), streamed and not; its result; the answer. */
async function toolRoundTrip() {
  const ask = [{ role: "user" as const, content: "What is the weather like in Paris today?" }];
  const common = {
    model: "smollm2",
    tools: [WEATHER_TOOL],
    parallel_tool_calls: false,
    temperature: 0,
    max_tokens: 100,
  };
  const r = await client.chat.completions.create({ ...common, messages: ask, tool_choice: "required" });
  const call = r.choices[0].message.tool_calls?.[0];
  const s = await client.chat.completions.create({
    ...common,
    messages: ask,
    tool_choice: "required",
    stream: true,
  });
  const chunks: unknown[] = [];
  let streamedCall: { name?: string; arguments?: string } = {};
  let streamedFinish: string | null = null;
  for await (const c of s) {
    chunks.push(c.choices[0]?.delta);
    const d = c.choices[0]?.delta?.tool_calls?.[0];
    if (d?.function) streamedCall = { name: d.function.name, arguments: d.function.arguments };
    streamedFinish = c.choices[0]?.finish_reason ?? streamedFinish;
  }
  const validate = new Ajv().compile(WEATHER_TOOL.function.parameters);
  const args = call && call.type === "function" ? JSON.parse(call.function.arguments) : undefined;
  const result = JSON.stringify({ city: args?.city, temperature_c: 18, sky: "sunny" });
  const followUp = [
    ...ask,
    r.choices[0].message,
    { role: "tool" as const, tool_call_id: call?.id ?? "", content: result },
  ];
  const final = await client.chat.completions.create({ ...common, messages: followUp, tool_choice: "none" });
  // the question alone under the same choice: what the call and its result added to the prompt
  const plain = await client.chat.completions.create({
    ...common,
    messages: ask,
    tool_choice: "none",
    max_tokens: 1,
  });
  return {
    finish_reason: r.choices[0].finish_reason,
    content: r.choices[0].message.content,
    name: call?.type === "function" ? call.function.name : undefined,
    arguments: args,
    valid: args !== undefined && validate(args),
    streamed: {
      ...streamedCall,
      finish_reason: streamedFinish,
      same: call?.type === "function" && streamedCall.arguments === call.function.arguments,
    },
    final: { finish_reason: final.choices[0].finish_reason, content: final.choices[0].message.content },
    prompt_tokens: { plain: plain.usage?.prompt_tokens, final: final.usage?.prompt_tokens },
  };
}

/** 20 seeded json_schema answers alone, then 16 of them at once; each validated by Ajv. */
async function jsonSchemaAnswers() {
  const ask = (seed: number) =>
    client.chat.completions.create({
      model: "smollm2",
      messages: [{ role: "user", content: "Describe a person, as JSON." }],
      temperature: 1,
      seed,
      max_tokens: 400,
      response_format: {
        type: "json_schema",
        json_schema: { name: "person", schema: PERSON_SCHEMA, strict: true },
      },
    });
  const validate = new Ajv().compile(PERSON_SCHEMA);
  // greedy: whole-model llama.cpp under the same grammar (its converter's, over the same vocabulary)
  const greedy = await client.chat.completions.create({
    model: "smollm2",
    messages: [{ role: "user", content: "Describe a person, as JSON." }],
    temperature: 0,
    max_tokens: 400,
    response_format: {
      type: "json_schema",
      json_schema: { name: "person", schema: PERSON_SCHEMA, strict: true },
    },
  });
  const personIds = tok.tokenize(tok.applyChat([{ role: "user", content: "Describe a person, as JSON." }]), {
    addSpecial: true,
    parseSpecial: true,
  });
  const gbnf = tok.schemaGrammar(PERSON_SCHEMA);
  const [wholeJson] = await wholeGreedy(model, [personIds], 400, isEnd, {
    grammar: () => tok.grammar({ gbnf }),
  });
  const alone: Array<{ text: string | null; finish: string }> = [];
  for (let seed = 0; seed < 20; seed++) {
    const r = await ask(seed);
    alone.push({ text: r.choices[0].message.content, finish: r.choices[0].finish_reason });
  }
  const together = await Promise.all(Array.from({ length: 16 }, (_, seed) => ask(seed)));
  // sessions per engine call at the last node, as each request saw them
  const batched = together.map((r) => {
    const nodes =
      (r as unknown as { strata: { nodes: Array<{ steps: number; batch_sessions: number }> } }).strata.nodes;
    return nodes[nodes.length - 1].batch_sessions / nodes[nodes.length - 1].steps;
  });
  return {
    valid: alone.map((a) => {
      try {
        return validate(JSON.parse(a.text ?? "")) ? "ok" : JSON.stringify(validate.errors);
      } catch (e) {
        return `no JSON (${a.finish}): ${(e as Error).message}`;
      }
    }),
    greedy: { text: greedy.choices[0].message.content, whole_text: textOf(wholeJson) },
    texts: alone.map((a) => a.text),
    distinct: new Set(alone.map((a) => a.text)).size,
    finish: alone.map((a) => a.finish),
    together_same: together.map((r, i) => r.choices[0].message.content === alone[i].text),
    mean_batch_sessions: batched.reduce((a, b) => a + b, 0) / batched.length,
  };
}

/** Runs openai_sdk.py with the Python `openai` package (pip-installed once into the cache). */
async function pythonSdk(gateway: string) {
  const python = `${await openaiVenv()}/bin/python`;
  const run = async (cmd: string, args: string[], env: Record<string, string> = {}) => {
    const o = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" }).output();
    const text = new TextDecoder().decode(o.stdout);
    if (o.code !== 0) {
      throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(o.stderr).slice(-2000)}`);
    }
    return text;
  };
  const script = new URL("./openai_sdk.py", import.meta.url).pathname;
  const out = JSON.parse(
    await run(python, [script], {
      STRATA_GATEWAY: gateway,
      STRATA_KEY: KEY,
      STRATA_WEATHER: JSON.stringify(WEATHER_TOOL),
      STRATA_PERSON: JSON.stringify(PERSON_SCHEMA),
    }),
  );
  const validate = new Ajv().compile(WEATHER_TOOL.function.parameters);
  const person = new Ajv().compile(PERSON_SCHEMA);
  out.tools.valid = validate(out.tools.arguments);
  out.json_schema_valid = out.json_schema.map((t: string) => person(JSON.parse(t)));
  return out;
}
