// `strata up --routes 2` end to end: chat completions (streamed and not) equal whole-model
// llama.cpp's greedy text; 16 concurrent streams over both routes; OpenAI-shaped errors; a
// node whose probe disagrees is refused and never routed; a node killed mid-generation.
// Prints one JSON object; gateway.test.ts asserts on it.
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { trackerClient } from "../../server/node/tracker-client.ts";
import { ShardProcess } from "../../server/shard/shard-client.ts";
import { ServiceProcess } from "../../server/util/service-process.ts";
import { sigma, top2 } from "../../src/parity/compare.ts";
import { sseData } from "../../src/gateway/sse.ts";

const KEY = "test-key";
const MAX = 24;
const nodeToken = crypto.randomUUID();
const model = defaultModelPath();
const questions = [
  "What is the capital of France?",
  "List three prime numbers.",
  "Hi!",
  "What is 12 times 7?",
];

// whole-model llama.cpp, greedy, the same template and tokenization as the gateway
const tok = await NativeTokenizer.load(model);
const whole = await ShardProcess.spawn({
  modelPath: model,
  range: "whole",
  kvCells: 512,
  maxSequences: 1,
  batchTokens: 512,
  threads: 2,
  backend: "cpu",
});
const reference: string[] = [];
// per question: the greedy tokens and the whole model's top-2 gap (in σ of the logits) at each
const refSteps: Array<Array<{ token: number; gapSigma: number }>> = [];
for (const q of questions) {
  const ids = tok.tokenize(tok.applyChat([{ role: "user", content: q }]), {
    addSpecial: true,
    parseSpecial: true,
  });
  const seq = await whole.open();
  const out: number[] = [];
  const steps: Array<{ token: number; gapSigma: number }> = [];
  let input = ids;
  let at = 0;
  for (let i = 0; i < MAX; i++) {
    const n = input.length;
    const r = await whole.decode(
      input,
      Int32Array.from({ length: n }, (_, k) => at + k),
      new Int32Array(n).fill(seq),
      Uint8Array.from({ length: n }, (_, k) => (k === n - 1 ? 1 : 0)),
    );
    const best = top2(r.data);
    const t = best.best;
    steps.push({ token: t, gapSigma: best.gap / sigma(r.data) });
    if (tok.isEndOfGeneration(t)) break;
    out.push(t);
    at += n;
    input = Int32Array.of(t);
  }
  await whole.release(seq);
  reference.push(tok.detokenize(out));
  refSteps.push(steps);
}

/**
 * Where a generated text leaves the whole model's greedy text: the first reference step whose
 * text is no longer a prefix, with the whole model's top-2 gap there. Batched decode is not
 * bit-identical, so a divergence is accepted only where the reference itself was within
 * 0.5 σ of choosing otherwise (the parity rule, src/parity/tolerance.ts).
 */
function divergence(q: number, text: string) {
  const steps = refSteps[q];
  for (let k = 0; k < steps.length; k++) {
    const upTo = tok.detokenize(
      steps.slice(0, k + 1).map((s) => s.token).filter((t) => !tok.isEndOfGeneration(t)),
    );
    // at the reference's end of generation, the run diverged if it went on
    const diverged = tok.isEndOfGeneration(steps[k].token) ? text !== upTo : !text.startsWith(upTo);
    if (diverged) return { step: k, gapSigma: steps[k].gapSigma, nearTie: steps[k].gapSigma < 0.5 };
  }
  return { step: steps.length, gapSigma: -1, nearTie: false };
}

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

async function streamChat(q: string, extra: Record<string, unknown> = {}) {
  const t0 = performance.now();
  const r = await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: auth,
    body: body(q, { stream: true, ...extra }),
  });
  let text = "";
  let finish: string | null = null;
  let route = "";
  let error: { code?: string; message: string } | undefined;
  let done = false;
  let firstTokenMs: number | undefined;
  for await (const data of sseData(r.body!)) {
    if (data === "[DONE]") {
      done = true;
      continue;
    }
    const j = JSON.parse(data);
    if (j.error) error = j.error;
    const c = j.choices?.[0];
    if (c?.delta?.content) {
      firstTokenMs ??= performance.now() - t0;
      text += c.delta.content;
    }
    if (c?.finish_reason) finish = c.finish_reason;
    if (j.strata) route = j.strata.route;
  }
  return { status: r.status, text, finish, route, error, done, ms: performance.now() - t0, firstTokenMs };
}

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
    "--tracker-token",
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

  // 6. kill a node of route 0 while long streams run on both routes
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
  const states = (await tracker.client.nodes({})).nodes;
  const busiest = states.filter((n) => n.shard?.range?.start === 12 && n.node !== "liar")
    .sort((a, b) => b.sessions - a.sessions)[0];
  const victim = nodes.find((n) => n.name === busiest.node)!;
  const killedAt = performance.now();
  Deno.kill(victim.pid, "SIGKILL");
  const ended = await Promise.all(long.map(async (p) => {
    const r = await p;
    return { route: r.route, error: r.error, done: r.done, endedAfterKillMs: performance.now() - killedAt };
  }));
  const quietDone = (await Promise.all(quiet)).map((r) => ({
    status: r.status,
    attempts: r.json.strata?.attempts,
    route: r.json.strata?.route,
    error: r.json.error,
  }));
  // the dead node leaves the tracker when its lease lapses
  let leftAfterMs = -1;
  while (performance.now() - killedAt < 60_000) {
    const n = (await tracker.client.nodes({})).nodes.find((x) => x.node === victim.name);
    if (n && !n.live) {
      leftAfterMs = performance.now() - killedAt;
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
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
    l.startsWith("strata_route_requests_total") || l.startsWith("strata_ttft")
  );
  tracker.close();
} finally {
  await net.stop(20_000);
  tok.close();
}
console.log(JSON.stringify(report));
// leftover handles (keep-alive connections, a child pipe) must not hold the test up
Deno.exit(0);
