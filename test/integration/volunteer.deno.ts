// A browser tab in a route, end to end: `up` with native [0,10) → a headless Chromium tab on
// the volunteer page [10,20) → a Deno WASM node [20,30). Chats through the gateway equal
// whole-model llama.cpp's greedy text; a json_schema answer validates (the WASM node samples
// under the grammar); the tab downloaded only its range's bytes and a
// reload reuses its OPFS cache; 8 concurrent sessions batch in the tab; the chat page shows
// the route; closing the tab mid-generation fails the stream cleanly and the tracker drops
// the tab. Screenshots go to SHOTS_DIR. Prints one JSON object; volunteer.test.ts asserts.
import { Ajv } from "ajv";
import { layerRange } from "../../src/engine/layer-range.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { up } from "../../server/up/up.ts";
import { CHAT_QUESTIONS, chatReference } from "../../checks/parity/chat-reference.ts";
import { streamChat } from "../../checks/parity/chat-client.ts";

const MAX = 24;
const CITY = {
  type: "object",
  properties: { city: { type: "string", maxLength: 30 }, country: { type: "string", maxLength: 30 } },
  required: ["city", "country"],
  additionalProperties: false,
};
const shots = Deno.env.get("SHOTS_DIR") ?? await Deno.makeTempDir({ prefix: "strata-shots-" });
Deno.mkdirSync(shots, { recursive: true });
const model = defaultModelPath();
const questions = CHAT_QUESTIONS;
const ref = await chatReference(model, questions, MAX);
const dir = await Deno.makeTempDir({ prefix: "strata-volunteer-" });

const net = await up({
  model: "smollm2",
  split: [layerRange(0, 10), layerRange(10, 20), layerRange(20, 30)],
  routes: 1,
  backend: "cpu",
  threads: 1,
  gatewayListen: "127.0.0.1:0",
  apiKeys: [],
  leaseMs: 3000,
  dbPath: `${dir}/tracker.db`,
  browserShard: layerRange(10, 20),
  wasmShards: [layerRange(20, 30)],
  // the tab is 10:20's only host: a stream it leaves waits this long for another, then ends
  repairDeadlineMs: 3000,
});
const gw = net.gateway;
const tab = net.browser!;
const tracker = trackerClient(net.tracker);
const nodesNow = async () => (await tracker.client.nodes({}, { timeoutMs: 5000 })).nodes;
const ask = (q: number) => ({
  model: "smollm2",
  messages: [{ role: "user", content: questions[q] }],
  temperature: 0,
  max_tokens: MAX,
});
const judge = (q: number, text: string) => ({
  q,
  text,
  exact: text === ref.texts[q],
  at: text === ref.texts[q] ? undefined : ref.divergence(q, text),
});
const report: Record<string, unknown> = { reference: ref.texts };
try {
  const first = await tab.state();
  report.tab = {
    name: first.name,
    engine: first.engine,
    fallback: first.fallback,
    range: first.assignment?.range,
    fileBytes: first.assignment?.fileBytes,
    download: first.download,
  };
  const routeNodes = await nodesNow();
  report.nodes = routeNodes.map((n) => ({
    node: n.node,
    layers: `${n.shard?.range?.start}:${n.shard?.range?.end}`,
    engine: n.shard?.engine,
    admission: n.admission,
  }));

  // 1. one non-streamed chat: whole-model text, served through the tab
  const r = await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(ask(0)),
  });
  const j = await r.json();
  report.plain = { status: r.status, ...judge(0, j.choices?.[0]?.message?.content ?? ""), strata: j.strata };

  // 1a. structured output through the tab: the Deno WASM node samples under the grammar
  const structured = await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      ...ask(0),
      max_tokens: 120,
      response_format: { type: "json_schema", json_schema: { name: "city", schema: CITY, strict: true } },
    }),
  });
  const sj = await structured.json();
  const answer = sj.choices?.[0]?.message?.content ?? "";
  report.structured = {
    status: structured.status,
    finish: sj.choices?.[0]?.finish_reason,
    valid: (() => {
      try {
        return new Ajv().compile(CITY)(JSON.parse(answer));
      } catch {
        return false;
      }
    })(),
    text: answer,
  };

  // 2. eight concurrent streams (each question twice): all correct, batched in the tab. Decoding
  // sessions of a route of three take turns in three cohorts: eight at once put two or more in one
  const before = (await tab.state()).info;
  const asked = [...questions.keys(), ...questions.keys()];
  const eight = await Promise.all(asked.map((q) => streamChat(gw, {}, ask(q))));
  const after = await tab.state();
  report.concurrent = {
    results: eight.map((s, i) => ({
      ...judge(asked[i], s.text),
      done: s.done,
      error: s.error,
      route: s.route,
    })),
    tabBatches: after.info.batches - before.batches,
    tabMaxBatchSessions: after.info.maxBatchSessions,
    tabSessionsServed: after.info.sessionsServed,
  };
  // a figure, not a check: how long the page's thread (its seams, its drawing) was blocked
  report.tabMainThread = after.mainThread;
  await tab.page.screenshot({ path: `${shots}/volunteer-page.png`, fullPage: true });

  // 3. the chat page, in a second tab of the same browser
  const chat = await tab.chromium.page(`${gw}/chat/`);
  await chat.waitForFunction(() => document.getElementById("model")?.textContent?.startsWith("model "));
  await chat.fill("#prompt", questions[3]);
  await chat.click("#send");
  await chat.waitForSelector(".msg.assistant[data-done]", { timeout: 120_000 });
  // the route's table is folded under the reply: unfold it, as a person would
  await chat.click("details.route summary");
  await chat.waitForSelector(".route table");
  report.chatPage = {
    ...judge(3, (await chat.textContent(".msg.assistant")) ?? ""),
    route: await chat.getAttribute(".route", "data-route"),
    rows: await chat.$$eval(".route tr", (rows) => rows.length - 1),
  };
  await chat.screenshot({ path: `${shots}/chat-page.png`, fullPage: true });
  await chat.close();

  // 4. reload the volunteer page: the old tab leaves, the new one downloads nothing
  const oldName = after.name;
  await tab.page.reload();
  const again = await tab.contribute();
  let oldGone = false;
  for (let i = 0; i < 50 && !oldGone; i++) {
    oldGone = !(await nodesNow()).some((n) => n.node === oldName);
    if (!oldGone) await new Promise((res) => setTimeout(res, 100));
  }
  report.reload = { name: again.name, download: again.download, oldNodeDropped: oldGone };
  const afterReload = await streamChat(gw, {}, ask(2));
  report.afterReload = { ...judge(2, afterReload.text), route: afterReload.route };

  // 5. close the tab while it generates
  const tabName = again.name;
  let closedAt = -1;
  const long = { ...ask(1), max_tokens: 200 };
  const cut = await streamChat(gw, {}, long, (text) => {
    if (closedAt < 0 && text.length > 8) {
      closedAt = text.length;
      void tab.page.close({ runBeforeUnload: true });
    }
  });
  let dropped = false;
  const t0 = performance.now();
  while (!dropped && performance.now() - t0 < 10_000) {
    dropped = !(await nodesNow()).some((n) => n.node === tabName);
    if (!dropped) await new Promise((res) => setTimeout(res, 100));
  }
  report.closeTab = {
    closedAtChars: closedAt,
    stream: { done: cut.done, finish: cut.finish, error: cut.error, chars: cut.text.length },
    trackerDropped: dropped,
    droppedAfterMs: Math.round(performance.now() - t0),
  };
  const noRoute = await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(ask(2)),
  });
  report.afterClose = { status: noRoute.status, error: (await noRoute.json()).error };
  report.shots = shots;
} finally {
  tracker.close();
  await net.stop();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
console.log(JSON.stringify(report));
Deno.exit(0);
