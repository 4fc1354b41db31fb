// Concurrency as a user sees it, with the official `openai` npm client: `strata up --routes 2`
// (batch-invariant nodes, the gateway's queue), each prompt answered alone first, then 64
// streamed greedy chats at once over a few prompts. Every one must complete without an error
// and equal its prompt's alone answer byte for byte; afterwards every node holds 0 sessions and
// 0 KV cells. Then: one non-streamed request without max_tokens (a long answer) with 16 others
// at the same time; a non-streamed client that disconnects (its cells freed on every node within
// a second); and 256 requests at once against the gateway's queue of 64 (the excess get 429 with
// Retry-After, nothing hangs, every node ends empty). Prints one JSON object; burst.test.ts
// asserts on it.
import OpenAI from "openai";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { CHAT_QUESTIONS } from "../../checks/parity/chat-reference.ts";

const AT_ONCE = Number(Deno.env.get("AT_ONCE") ?? 64);
const MAX_TOKENS = 24;
// --ctx-size: the request without max_tokens below runs to a session's whole context, which
// the cap keeps at 1,024 tokens (a minute of decoding here, not SmolLM2's 8,192)
const CTX = 1024;
const net = await ServiceProcess.start(
  "strata up",
  ["up", "--port", "0", "--routes", "2", "--ctx-size", String(CTX)],
  {},
  600_000,
);
const nodeUrls = (net.ready.nodes as Array<{ url: string }>).map((n) => n.url);
const client = new OpenAI({ baseURL: `${net.ready.gateway}/v1`, apiKey: "none", maxRetries: 0 });
const seams = new GrpcSeams();

async function chat(q: number): Promise<{ text: string; finish: string | null; error?: string }> {
  try {
    const stream = await client.chat.completions.create({
      model: "smollm2",
      messages: [{ role: "user", content: CHAT_QUESTIONS[q] }],
      temperature: 0,
      max_tokens: MAX_TOKENS,
      stream: true,
    });
    let text = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    return { text, finish };
  } catch (e) {
    return { text: "", finish: null, error: e instanceof Error ? e.message : String(e) };
  }
}

const out: Record<string, unknown> = {};
try {
  const alone: string[] = [];
  for (let q = 0; q < CHAT_QUESTIONS.length; q++) alone.push((await chat(q)).text);
  out.alone = alone;
  const t0 = performance.now();
  const burst = await Promise.all(Array.from({ length: AT_ONCE }, (_, i) => chat(i % CHAT_QUESTIONS.length)));
  out.burst_ms = performance.now() - t0;
  out.requests = burst.length;
  out.errors = burst.filter((b) => b.error || !b.finish).map((b) => b.error ?? "no finish");
  out.differing = burst
    .map((b, i) => ({ i, q: i % CHAT_QUESTIONS.length, text: b.text }))
    .filter((b) => b.text !== alone[b.q]);
  // give the last releases a moment to reach every node
  await new Promise((r) => setTimeout(r, 500));
  const infos = await Promise.all(nodeUrls.map((u) => seams.info(u, 5000)));
  out.nodes_after = infos.map((i) => ({
    node: i.node,
    sessions: i.sessions,
    kv_cells_used: i.kvCellsUsed,
    // finished chats' KV the node keeps for the prompts that extend them
    prefix_cells: i.prefix?.cells ?? 0,
    max_batch_sessions: i.maxBatchSessions,
  }));
  const metrics = await (await fetch(`${net.ready.gateway}/metrics`)).text();
  out.queued_total = Number(/^strata_queue_requests_total (\d+)/m.exec(metrics)?.[1] ?? NaN);

  // one request without max_tokens (as many clients send), non-streamed, a long answer, and 16
  // ordinary ones at the same time: they run beside it and finish while it still runs
  const gw = String(net.ready.gateway);
  const post = (body: Record<string, unknown>, signal?: AbortSignal) =>
    fetch(`${gw}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "smollm2", temperature: 0, ...body }),
      signal,
    });
  const LONG = "Write a very long story about a dragon who learns to cook, with many chapters.";
  let longDoneAt = 0;
  const long = post({ messages: [{ role: "user", content: LONG }] }).then(async (r) => {
    const j = await r.json();
    longDoneAt = performance.now();
    return { status: r.status, finish: j.choices?.[0]?.finish_reason, tokens: j.usage?.completion_tokens };
  });
  await new Promise((r) => setTimeout(r, 300));
  const others = await Promise.all(Array.from({ length: 16 }, async (_, i) => {
    const r = await post({
      messages: [{ role: "user", content: CHAT_QUESTIONS[i % 4] }],
      max_tokens: MAX_TOKENS,
    });
    await r.json();
    return { status: r.status, doneAt: performance.now() };
  }));
  const longResult = await long;
  out.long = longResult;
  out.ctx_size = CTX;
  out.others_ok = others.filter((o) => o.status === 200).length;
  out.others_done_before_long = others.filter((o) => o.doneAt < longDoneAt).length;

  // a non-streamed client that goes away: its cells are freed on every node within a second
  const nodesKv = async () =>
    (await Promise.all(nodeUrls.map((u) => seams.info(u, 5000)))).map((i) => i.kvCellsUsed);
  // (what the node kept of finished chats stays: the client's cells are what comes on top)
  const kvBefore = await nodesKv();
  out.kv_before_client = kvBefore;
  const leaving = new AbortController();
  const gone = post({ messages: [{ role: "user", content: LONG }] }, leaving.signal).catch(() => "aborted");
  await new Promise((r) => setTimeout(r, 1500));
  out.kv_while_client_there = await nodesKv();
  leaving.abort();
  const abortedAt = performance.now();
  await gone;
  let freedMs = -1;
  while (performance.now() - abortedAt < 3000) {
    if ((await nodesKv()).every((c, k) => c <= kvBefore[k])) {
      freedMs = performance.now() - abortedAt;
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  out.kv_after_client_left = await nodesKv();
  out.freed_ms = freedMs;

  // 256 at once against a queue of 64 (2 routes × 16 sessions run, 64 wait, the rest are refused)
  const flood = await Promise.all(Array.from({ length: 256 }, async (_, i) => {
    const r = await post({ messages: [{ role: "user", content: CHAT_QUESTIONS[i % 4] }], max_tokens: 8 });
    await r.body?.cancel();
    return { status: r.status, retryAfter: r.headers.get("retry-after") };
  }));
  out.flood = {
    ok: flood.filter((f) => f.status === 200).length,
    refused: flood.filter((f) => f.status === 429).length,
    refused_with_retry_after: flood.filter((f) => f.status === 429 && Number(f.retryAfter) > 0).length,
    other: flood.filter((f) => f.status !== 200 && f.status !== 429).map((f) => f.status),
  };
  await new Promise((r) => setTimeout(r, 500));
  const end = await Promise.all(nodeUrls.map((u) => seams.info(u, 5000)));
  out.nodes_at_end = end.map((i) => ({
    node: i.node,
    sessions: i.sessions,
    kv_cells_used: i.kvCellsUsed,
    prefix_cells: i.prefix?.cells ?? 0,
  }));
} finally {
  // strata up stops its own services first: give it the time
  await net.stop(30_000);
}
console.log(JSON.stringify(out));
Deno.exit(0);
