// The gateway's request queue, end to end: `strata up` with one route of 2 nodes that take 2
// sessions each. (a) 8 concurrent requests all complete (they wait their turn); (b) a second
// gateway on the same tracker with a queue of 4 gets 16 at once: the excess get 429 with
// Retry-After, nothing hangs, and the nodes end with no session; (c) /metrics counts the
// queue; (d) a non-streamed client that leaves frees its session, a queued one leaves the
// queue; (e) a third gateway with limits per client: one key's second request at once and its
// fourth in a minute get 429, while another key's request beside them is served. Prints one
// JSON object; request-queue.test.ts asserts on it.
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { CHAT_QUESTIONS } from "../../checks/parity/chat-reference.ts";
import { sseData } from "../../src/gateway/sse.ts";

const SLOTS = 2;
const net = await ServiceProcess.start(
  "strata up",
  ["up", "--port", "0", "--max-sessions", String(SLOTS), "--lease-ms", "3000"],
  {},
  600_000,
);
const gw = String(net.ready.gateway);
const trackerUrl = String(net.ready.tracker);
const nodeUrls = (net.ready.nodes as Array<{ url: string }>).map((n) => n.url);
const tracker = trackerClient(trackerUrl);
const seams = new GrpcSeams();
const json = { "content-type": "application/json" };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const body = (i: number, extra: Record<string, unknown> = {}) => ({
  model: "smollm2",
  messages: [{ role: "user", content: CHAT_QUESTIONS[i % CHAT_QUESTIONS.length] }],
  temperature: 0,
  max_tokens: 16,
  ...extra,
});

/** One request, streamed or not, as the client sees its end (`onData`: each event as it comes). */
async function ask(
  gateway: string,
  i: number,
  stream: boolean,
  extra: Record<string, unknown> = {},
  key?: string,
  onData?: () => void,
) {
  const t0 = performance.now();
  const r = await fetch(`${gateway}/v1/chat/completions`, {
    method: "POST",
    headers: key ? { ...json, authorization: `Bearer ${key}` } : json,
    body: JSON.stringify({ ...body(i, extra), stream }),
  });
  const seen = { stream, status: r.status, retryAfter: r.headers.get("retry-after") };
  if (stream && r.ok) {
    // an event stream: done at [DONE], an error event if one came
    let done = false;
    let error: string | undefined;
    for await (const data of sseData(r.body!)) {
      onData?.();
      if (data === "[DONE]") done = true;
      else error ??= JSON.parse(data).error?.code;
    }
    return { ...seen, done: done && !error, error, ms: performance.now() - t0 };
  }
  const j = await r.json();
  return {
    ...seen,
    done: r.status === 200 && !!j.choices?.[0]?.finish_reason,
    error: j.error?.code,
    message: j.error?.message,
    ms: performance.now() - t0,
  };
}

/** The tracker's and the nodes' own view of their sessions. */
async function sessions() {
  const { nodes } = await tracker.client.nodes({}, { timeoutMs: 5000 });
  const infos = await Promise.all(nodeUrls.map((u) => seams.info(u, 5000)));
  return {
    tracker: nodes.map((n) => ({ node: n.node, sessions: n.sessions, load: n.load })),
    nodes: infos.map((i) => i.sessions),
  };
}

const idle = (s: Awaited<ReturnType<typeof sessions>>) =>
  s.nodes.every((n) => n === 0) && s.tracker.every((t) => t.sessions === 0 && t.load === 0);

/** Polls until `ok` (or the time is up); returns the last view. */
async function until(ok: (s: Awaited<ReturnType<typeof sessions>>) => boolean, ms = 15_000) {
  const end = performance.now() + ms;
  for (;;) {
    const s = await sessions();
    if (ok(s) || performance.now() > end) return s;
    await sleep(100);
  }
}

/** The most sessions the tracker counted on any node while `work` ran. */
async function peakLoad<T>(work: Promise<T>): Promise<{ result: T; peak: number }> {
  let peak = 0;
  let running = true;
  const watch = (async () => {
    while (running) {
      const { nodes } = await tracker.client.nodes({}, { timeoutMs: 5000 });
      peak = Math.max(peak, ...nodes.map((n) => n.load));
      await sleep(50);
    }
  })();
  const result = await work;
  running = false;
  await watch;
  return { result, peak };
}

const metricLines = async (gateway: string) =>
  (await (await fetch(`${gateway}/metrics`)).text()).split("\n").filter((l) => l.startsWith("strata_queue"));

/** Resolves to "hung" if `p` takes longer than `ms`. */
const orHung = <T>(p: Promise<T>, ms: number) => Promise.race([p, sleep(ms).then(() => "hung" as const)]);

const report: Record<string, unknown> = { slots: SLOTS };
let second: ServiceProcess | undefined;
let limited: ServiceProcess | undefined;
try {
  // (a) 8 at once against 2 slots: they queue, all complete
  const burst = await peakLoad(
    orHung(Promise.all(Array.from({ length: 8 }, (_, i) => ask(gw, i, i % 2 === 0))), 120_000),
  );
  report.queued = { results: burst.result, peakLoad: burst.peak, metrics: await metricLines(gw) };

  // (b) a second gateway on the same tracker, queue bound 4: 16 at once
  second = await ServiceProcess.start("gateway (queue 4)", [
    "gateway",
    "--tracker",
    trackerUrl,
    "--listen",
    "127.0.0.1:0",
    "--queue-max",
    "4",
    "--queue-timeout-ms",
    "60000",
  ]);
  const gw2 = String(second.ready.url);
  // the burst's sessions are all gone (the nodes' next heartbeats say so) before the flood
  const before = await until(idle);
  const t0 = performance.now();
  const flood = await peakLoad(
    orHung(
      Promise.all(Array.from({ length: 16 }, (_, i) => ask(gw2, i, i % 2 === 1, { max_tokens: 24 }))),
      120_000,
    ),
  );
  report.bounded = {
    before,
    results: flood.result,
    peakLoad: flood.peak,
    allEndedMs: performance.now() - t0,
    after: await until(idle),
    // (c) the queue's counters
    metrics: await metricLines(gw2),
  };

  // (d) a non-streamed client that leaves mid-generation: its session is cancelled
  const story = { messages: [{ role: "user", content: "Tell me a long story about a dragon." }] };
  const leave = (ms: number) => {
    const gone = new AbortController();
    const done = fetch(`${gw}/v1/chat/completions`, {
      method: "POST",
      headers: json,
      body: JSON.stringify(body(0, { ...story, max_tokens: 400, temperature: 0.8, seed: 7 })),
      signal: gone.signal,
    }).then(() => "answered", (e) => (e as Error).name);
    return { done, abortAfter: () => sleep(ms).then(() => gone.abort()) };
  };
  const long = [leave(0), leave(0)];
  const busy = await until((s) => s.nodes.every((n) => n === SLOTS), 20_000);
  // a third waits in the queue; its client leaves too
  const third = leave(0);
  await sleep(500);
  const waiting = await metricLines(gw);
  await third.abortAfter();
  const thirdEnded = await orHung(third.done, 5000);
  await sleep(200);
  const afterThird = await metricLines(gw);
  for (const l of long) await l.abortAfter();
  const longEnded = await orHung(Promise.all(long.map((l) => l.done)), 5000);
  report.leaving = {
    busy,
    waiting,
    thirdEnded,
    afterThird,
    longEnded,
    after: await until(idle),
  };

  // (e) limits per client: key a may have 1 request at once and 3 a minute; key b beside it
  limited = await ServiceProcess.start("gateway (limits)", [
    "gateway",
    "--tracker",
    trackerUrl,
    "--listen",
    "127.0.0.1:0",
    "--api-key",
    "key-a",
    "--api-key",
    "key-b",
    "--limit-concurrent",
    "1",
    "--limit-requests-per-min",
    "3",
  ]);
  const gw3 = String(limited.ready.url);
  await until(idle);
  // a's first streams (a long answer: "Hi!" does not stop early); its second, sent once the
  // first's tokens flow, is over its 1 at once; b's is served
  let streaming!: () => void;
  const flowing = new Promise<void>((r) => (streaming = r));
  const first = ask(gw3, 2, true, { max_tokens: 64 }, "key-a", () => streaming());
  await flowing;
  const [secondAtOnce, other] = await Promise.all([
    ask(gw3, 1, false, {}, "key-a"),
    ask(gw3, 0, false, {}, "key-b"),
  ]);
  const firstDone = await first;
  // then one at a time: a's second and third of the minute pass, its fourth does not
  const inTurn = [];
  for (let i = 0; i < 3; i++) inTurn.push(await ask(gw3, i, false, {}, "key-a"));
  report.limits = { first: firstDone, secondAtOnce, other, inTurn, after: await until(idle) };
} finally {
  await limited?.stop();
  await second?.stop();
  seams.close();
  tracker.close();
  await net.stop(20_000);
}
console.log(JSON.stringify(report));
Deno.exit(0);
