// Gemma 3 270M (sliding-window attention, a base model: completions, no chat template) through
// `strata up`: a route of two native nodes over real seams, greedy completions against
// whole-model llama.cpp, one at a time and four at once (batched on both nodes).
// Prints one JSON object; gemma3.test.ts asserts on it.
import { resolveModel } from "../../server/model/fetch.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { sseData } from "../../src/gateway/sse.ts";
import { CHAT_QUESTIONS, chatReference } from "../../checks/parity/chat-reference.ts";

const MAX = 24;
const { path } = await resolveModel("gemma3-270m");
// the questions as text to complete; the fourth is long enough to run past the 512-token window
const prompts = [
  ...CHAT_QUESTIONS.slice(0, 3),
  Array(60).fill("The quick brown fox jumps over the lazy dog.").join(" "),
];
const ref = await chatReference(path, prompts, MAX);

const net = await ServiceProcess.start(
  "strata up",
  ["up", "--model", "gemma3-270m", "--port", "0", "--max-sessions", "4"],
  {},
  600_000,
);
const gw = String(net.ready.gateway);
const body = (prompt: string, stream: boolean) =>
  JSON.stringify({ model: "gemma3-270m", prompt, temperature: 0, max_tokens: MAX, stream });

async function complete(prompt: string) {
  const r = await fetch(`${gw}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: body(prompt, false),
  });
  const j = await r.json();
  return { status: r.status, text: j.choices?.[0]?.text, usage: j.usage, strata: j.strata };
}

async function streamed(prompt: string) {
  const r = await fetch(`${gw}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: body(prompt, true),
  });
  let text = "", done = false;
  for await (const data of sseData(r.body!)) {
    if (data === "[DONE]") done = true;
    else text += JSON.parse(data).choices?.[0]?.text ?? "";
  }
  return { status: r.status, text, done };
}

const report: Record<string, unknown> = { reference: ref.texts };
try {
  report.alone = [];
  for (const p of prompts) (report.alone as unknown[]).push(await complete(p));
  report.together = await Promise.all(prompts.map(streamed));
  report.divergence = (report.together as Array<{ text: string }>).map((t, i) => ref.divergence(i, t.text));
  report.chat = (await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "gemma3-270m", messages: [{ role: "user", content: "Hi" }] }),
  })).status;
} finally {
  await net.stop();
}
console.log(JSON.stringify(report));
