// `strata up --routes 2` end to end: chat completions (streamed and not) equal whole-model
// llama.cpp's greedy text; 16 concurrent streams over both routes; OpenAI-shaped errors; a
// node whose probe disagrees is refused and never routed; a node gone silent and a node
// killed mid-generation, their sessions repaired onto the other route.
// Prints one JSON object; gateway.test.ts asserts on it.
import { defaultModelPath } from "../../server/model/fetch.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { CHAT_QUESTIONS, chatReference } from "../../checks/parity/chat-reference.ts";
import { streamChat as gatewayStream } from "../../checks/parity/chat-client.ts";

const KEY = "test-key";
const MAX = 24;
const nodeToken = crypto.randomUUID();
const model = defaultModelPath();
const questions = CHAT_QUESTIONS;

// whole-model llama.cpp, greedy, the same template and tokenization as the gateway
const ref = await chatReference(model, questions, MAX);
const reference = ref.texts;
const divergence = ref.divergence;

const net = await ServiceProcess.start(
  "strata up",
  ["up", "--routes", "2", "--port", "0", "--api-key", KEY, "--lease-ms", "3000"],
  { STRATA_NODE_TOKEN: nodeToken },
  600_000,
);
const gw = String(net.ready.gateway);
const trackerUrl = String(net.ready.tracker);
const nodes = net.ready.nodes as Array<{ name: string; layers: string; route: number; pid: number }>;
const auth = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };

const body = (q: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    model: "smollm2",
    messages: [{ role: "user", content: q }],
    temperature: 0,
    max_tokens: MAX,
    ...extra,
  });

async function chat(q: string, extra: Record<string, unknown> = {}) {
  const r = await fetch(`${gw}/v1/chat/completions`, { method: "POST", headers: auth, body: body(q, extra) });
  return { status: r.status, json: await r.json() };
}

const streamChat = (q: string, extra: Record<string, unknown> = {}) =>
  gatewayStream(gw, auth, JSON.parse(body(q, extra)));

const report: Record<string, unknown> = { reference };
try {
  // 1. one non-streamed and one streamed completion against the whole model
  const plain = await chat(questions[0]);
  report.plain = {
    status: plain.status,
    text: plain.json.choices?.[0]?.message?.content,
    finish: plain.json.choices?.[0]?.finish_reason,
    usage: plain.json.usage,
    strata: plain.json.strata,
  };
  const streamed = await streamChat(questions[0]);
  report.streamed = streamed;

  // 2. sixteen concurrent streams, four prompts
  const many = await Promise.all(Array.from({ length: 16 }, (_, i) => streamChat(questions[i % 4])));
  report.concurrent = {
    correct: many.filter((m, i) => m.text === reference[i % 4] && m.done).length,
    routes: [...new Set(many.map((m) => m.route))].sort(),
    diverged: many.map((m, i) => ({
      i,
      text: m.text,
      want: reference[i % 4],
      error: m.error,
      at: divergence(i % 4, m.text),
    }))
      .filter((m) => m.text !== m.want),
  };

  // 3. errors in OpenAI's shape
  const post = async (path: string, b: string, headers: Record<string, string> = auth) => {
    const r = await fetch(`${gw}${path}`, { method: "POST", headers, body: b });
    return { status: r.status, error: (await r.json()).error };
  };
  report.errors = {
    malformed_json: await post("/v1/chat/completions", "{not json"),
    unknown_model: await post(
      "/v1/chat/completions",
      JSON.stringify({ model: "gpt-9", messages: [{ role: "user", content: "hi" }] }),
    ),
    too_long: await post("/v1/chat/completions", body("hi", { max_tokens: 200_000 })),
    no_messages: await post("/v1/chat/completions", JSON.stringify({ model: "smollm2" })),
    no_key: await post("/v1/chat/completions", body("hi"), { "content-type": "application/json" }),
    wrong_key: await post("/v1/chat/completions", body("hi"), {
      authorization: "Bearer nope",
      "content-type": "application/json",
    }),
  };
  const models = await fetch(`${gw}/v1/models`, { headers: auth });
  report.models = await models.json();

  // 4. a node whose outputs disagree: refused at admission, never routed
  const tracker = trackerClient(trackerUrl);
  const liar = await ServiceProcess.start("lying node", [
    "node",
    "--layers",
    "12:30",
    "--name",
    "liar",
    "--inject-fault",
    "scale",
    "--threads",
    "1",
    "--tracker",
    trackerUrl,
    "--node-token",
    nodeToken,
    "--listen",
    "127.0.0.1:0",
  ]);
  let liarState = "";
  for (let i = 0; i < 100 && !liarState.startsWith("refused"); i++) {
    await new Promise((r) => setTimeout(r, 200));
    liarState = (await tracker.client.nodes({})).nodes.find((n) => n.node === "liar")?.admission ?? "";
  }
  const afterLiar = await Promise.all(Array.from({ length: 6 }, (_, i) => chat(questions[i % 4])));
  report.liar = {
    admission: liarState,
    routes: [...new Set(afterLiar.map((r) => r.json.strata?.route))].sort(),
    assigned: Number(
      (await tracker.client.nodes({})).nodes.find((n) => n.node === "liar")?.routesAssigned ?? -1,
    ),
  };
  await liar.stop();

  // 5. a client that goes away mid-stream: its route is cancelled, the nodes hold no session
  const gone = new AbortController();
  const res = await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: auth,
    body: body(questions[0], { stream: true, max_tokens: 400, temperature: 0.8, seed: 3 }),
    signal: gone.signal,
  });
  const reader = res.body!.getReader();
  await reader.read();
  await reader.read();
  let sessionsWhileStreaming = 0;
  for (let i = 0; i < 30 && sessionsWhileStreaming === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    sessionsWhileStreaming = (await tracker.client.nodes({})).nodes.reduce((n, x) => n + x.sessions, 0);
  }
  gone.abort();
  let sessionsAfter = -1;
  for (let i = 0; i < 50 && sessionsAfter !== 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    sessionsAfter = (await tracker.client.nodes({})).nodes.reduce((n, x) => n + x.sessions, 0);
  }
  report.disconnect = { sessionsWhileStreaming, sessionsAfter };

  // 6. a node that goes silent (SIGSTOP: its connections stay open, nothing comes back, its
  // heartbeats stop): no seam fails, so the gateway's watch on the tracker must end its
  // sessions once the lease lapses; resumed, the node heartbeats and is live again
  const busiestLast = async () =>
    (await tracker.client.nodes({})).nodes
      .filter((n) => n.live && n.shard?.range?.start === 12 && n.node !== "liar")
      .sort((a, b) => b.sessions - a.sessions)[0];
  const still = Array.from(
    { length: 4 },
    (_, i) => streamChat(questions[i % 4], { max_tokens: 400, temperature: 0.7, seed: 20 + i }),
  );
  await new Promise((r) => setTimeout(r, 1500));
  const silentState = await busiestLast();
  const silent = nodes.find((n) => n.name === silentState.node)!;
  const stoppedAt = performance.now();
  Deno.kill(silent.pid, "SIGSTOP");
  const stillEnded = await Promise.all(still.map(async (p) => {
    const r = await p;
    return {
      route: r.route,
      error: r.error,
      done: r.done,
      repairs: r.repairs,
      endedAfterStopMs: performance.now() - stoppedAt,
    };
  }));
  Deno.kill(silent.pid, "SIGCONT");
  let liveAgain = false;
  for (let i = 0; i < 100 && !liveAgain; i++) {
    await new Promise((r) => setTimeout(r, 200));
    liveAgain = !!(await tracker.client.nodes({ nodes: [silent.name] })).nodes[0]?.live;
  }
  report.silent = { node: silent.name, sessions: silentState.sessions, during: stillEnded, liveAgain };

  // 7. kill a node of route 0 while long streams run on both routes
  const long = Array.from(
    { length: 6 },
    (_, i) => streamChat(questions[i % 4], { max_tokens: 400, temperature: 0.7, seed: i }),
  );
  // non-streamed requests have shown nothing yet: one that loses its route is retried elsewhere
  const quiet = Array.from(
    { length: 4 },
    (_, i) => chat(questions[i % 4], { max_tokens: 300, temperature: 0.7, seed: 10 + i }),
  );
  await new Promise((r) => setTimeout(r, 1500));
  // the last-layer node carrying the most sessions (as its heartbeats report them)
  const busiest = await busiestLast();
  const victim = nodes.find((n) => n.name === busiest.node)!;
  const killedAt = performance.now();
  Deno.kill(victim.pid, "SIGKILL");
  // the dead node leaves the tracker when its lease lapses
  const leaseLapse = (async () => {
    while (performance.now() - killedAt < 60_000) {
      const n = (await tracker.client.nodes({})).nodes.find((x) => x.node === victim.name);
      if (n && !n.live) return performance.now() - killedAt;
      await new Promise((r) => setTimeout(r, 100));
    }
    return -1;
  })();
  const ended = await Promise.all(long.map(async (p) => {
    const r = await p;
    return {
      route: r.route,
      error: r.error,
      done: r.done,
      repairs: r.repairs,
      endedAfterKillMs: performance.now() - killedAt,
    };
  }));
  const quietDone = (await Promise.all(quiet)).map((r) => ({
    status: r.status,
    attempts: r.json.strata?.attempts,
    route: r.json.strata?.route,
    repairs: r.json.strata?.repairs,
    error: r.json.error,
  }));
  // (watched from the kill on, beside the streams that go on: not after the longest of them)
  const leftAfterMs = await leaseLapse;
  const later = await Promise.all(Array.from({ length: 4 }, (_, i) => streamChat(questions[i % 4])));
  report.kill = {
    victim: victim.name,
    victim_sessions: busiest.sessions,
    non_streamed: quietDone,
    during: ended,
    left_tracker_after_ms: leftAfterMs,
    later: later.map((r, i) => ({
      ok: r.done && !r.error && (r.text === reference[i % 4] || divergence(i % 4, r.text).nearTie),
      route: r.route,
      error: r.error,
    })),
    // signal 0-like probe: SIGCONT to a live process is harmless, to a dead one it throws
    others_alive: nodes.filter((n) => n.name !== victim.name).map((n) => {
      try {
        Deno.kill(n.pid, "SIGCONT");
        return true;
      } catch {
        return false;
      }
    }),
  };
  const metrics = await (await fetch(`${gw}/metrics`)).text();
  report.metrics = metrics.split("\n").filter((l) =>
    l.startsWith("strata_route_requests_total") || l.startsWith("strata_ttft") ||
    l.startsWith("strata_repair")
  );
  tracker.close();
} finally {
  await net.stop(20_000);
}
console.log(JSON.stringify(report));
// leftover handles (keep-alive connections, a child pipe) must not hold the test up
Deno.exit(0);
