// Abuse beside honest work: `strata up` (one route of two nodes) serves 8 honest chats at once,
// first alone, then while a hostile client floods and stalls the gateway and a hostile peer
// floods a node's port with connections, streams, garbage, oversized and replayed frames, a
// forged ticket, sessions it never uses, and the relay with channels. The honest chats'
// text, TTFT and decode speed in both runs, each process's peak RSS, what the hostile side met,
// and that what it opened was freed. Prints one JSON object; abuse.test.ts asserts on it.
import * as http2 from "node:http2";
import * as net from "node:net";
import { create, fromBinary } from "@bufbuild/protobuf";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { artifactSha256 } from "../../server/model/hash.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { Dialer } from "../../node-apis/seam/dialer.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { connDuplex } from "../../node-apis/http/conn-duplex.ts";
import { connectRelay } from "../../node-apis/relay/ws-socket.ts";
import { Phase, type SeamFrame, SeamFrameSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { FAST_PREFACE, MessageReader, MuxClient } from "../../src/seam/mux.ts";
import { packTensor } from "../../src/seam/tensor.ts";
import { SCHEMA_VERSION } from "../../src/seam/limits.ts";
import type { SeamLink } from "../../src/seam/link.ts";
import { RouteSession } from "../../src/route/route-session.ts";
import { RelayPeer } from "../../src/relay/peer.ts";
import { peerToken } from "../../src/relay/token.ts";
import { CHAT_QUESTIONS, chatReference } from "../../checks/parity/chat-reference.ts";
import { streamChat } from "../../checks/parity/chat-client.ts";

const MAX = 24;
const HONEST = Array.from({ length: 8 }, (_, i) => `honest-${i}`);
const MALLORY = "mallory";
const UNUSED_MS = 5_000;
const model = defaultModelPath();
const ref = await chatReference(model, CHAT_QUESTIONS, MAX);
const artifact = await artifactSha256(model);
const nodeToken = crypto.randomUUID();
const relaySecret = crypto.randomUUID();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const errorText = (e: unknown) => e instanceof Error ? e.message : String(e);

const net_ = await ServiceProcess.start(
  "strata up",
  [
    "up",
    "--port",
    "0",
    ...[...HONEST, MALLORY].flatMap((k) => ["--api-key", k]),
    "--limit-concurrent",
    "2",
    "--limit-requests-per-min",
    "120",
    "--unused-session-ms",
    String(UNUSED_MS),
  ],
  { STRATA_NODE_TOKEN: nodeToken, STRATA_RELAY_SECRET: relaySecret },
  600_000,
);
const gw = String(net_.ready.gateway);
const trackerUrl = String(net_.ready.tracker);
const relayUrl = String(net_.ready.relay);
const nodes = net_.ready.nodes as Array<{ name: string; layers: string; url: string; pid: number }>;
const pids: Record<string, number> = {
  ...Object.fromEntries(nodes.map((n) => [n.name, n.pid])),
  gateway: Number(net_.ready.gateway_pid),
  tracker: Number(net_.ready.tracker_pid),
};

/** Peak RSS (MB) of each process while `run` runs, sampled every 100 ms. */
async function peaks<T>(run: () => Promise<T>): Promise<{ result: T; rss_mb: Record<string, number> }> {
  const peak: Record<string, number> = {};
  const sample = () => {
    for (const [name, pid] of Object.entries(pids)) {
      try {
        const kb = Number(/VmRSS:\s+(\d+)/.exec(Deno.readTextFileSync(`/proc/${pid}/status`))?.[1] ?? 0);
        peak[name] = Math.max(peak[name] ?? 0, kb / 1024);
      } catch {
        // gone
      }
    }
  };
  sample();
  const timer = setInterval(sample, 100);
  try {
    const result = await run();
    sample();
    return { result, rss_mb: peak };
  } finally {
    clearInterval(timer);
  }
}

const fds = () =>
  Object.fromEntries(nodes.map((n) => [n.name, [...Deno.readDirSync(`/proc/${n.pid}/fd`)].length]));
const relayHealth = async () =>
  await (await fetch(`${relayUrl.replace(/^ws/, "http")}/health`)).json() as {
    peers: number;
    channels: number;
  };
const grpc = new GrpcSeams();
const nodeSessions = async () =>
  Object.fromEntries(await Promise.all(nodes.map(async (n) => [n.name, (await grpc.info(n.url)).sessions])));

/** The 8 honest chats at once, each with its own key. */
async function honest() {
  const quantile = (xs: number[], q: number) =>
    [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))];
  const chats = await Promise.all(HONEST.map(async (key, i) => {
    const q = i % CHAT_QUESTIONS.length;
    const s = await streamChat(gw, { authorization: `Bearer ${key}` }, {
      model: "smollm2",
      messages: [{ role: "user", content: CHAT_QUESTIONS[q] }],
      temperature: 0,
      max_tokens: MAX,
    });
    const span = s.pieceAt.length > 1 ? (s.pieceAt[s.pieceAt.length - 1] - s.pieceAt[0]) / 1000 : NaN;
    return {
      q,
      status: s.status,
      done: s.done,
      error: s.error,
      text: s.text,
      divergence: s.text === ref.texts[q] ? undefined : ref.divergence(q, s.text),
      ttft_ms: s.firstTokenMs ?? NaN,
      decode_tps: (s.pieceAt.length - 1) / span,
    };
  }));
  return {
    chats,
    ttft_ms_p50: quantile(chats.map((c) => c.ttft_ms), 0.5),
    decode_tps_p50: quantile(chats.map((c) => c.decode_tps), 0.5),
  };
}

// ---- the hostile side: each runs until `stop.now` -------------------------------------------
const stop = { now: false };

/** Key "mallory" asks in a loop from 4 connections at once. */
async function gatewayFlood() {
  const statuses: Record<string, number> = {};
  const worker = async () => {
    while (!stop.now) {
      const r = await fetch(`${gw}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${MALLORY}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "smollm2",
          messages: [{ role: "user", content: "flood" }],
          max_tokens: 4,
        }),
      }).catch(() => undefined);
      const k = String(r?.status ?? "error");
      statuses[k] = (statuses[k] ?? 0) + 1;
      await r?.body?.cancel();
      await sleep(5);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  return statuses;
}

/** 200 connections to the gateway that send a request's first header line, then a byte a second. */
async function slowloris() {
  const port = Number(new URL(gw).port);
  const conns: Deno.Conn[] = [];
  for (let i = 0; i < 200; i++) {
    const c = await Deno.connect({ hostname: "127.0.0.1", port });
    await c.write(new TextEncoder().encode("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: "));
    conns.push(c);
  }
  let drips = 0;
  while (!stop.now) {
    await sleep(1000);
    await Promise.all(conns.map((c) => c.write(new Uint8Array([0x61])).catch(() => 0)));
    drips++;
  }
  for (const c of conns) {
    try {
      c.close();
    } catch {
      // closed by the gateway
    }
  }
  return { connections: conns.length, drips };
}

/**
 * 300 calls on one HTTP/2 connection, then a polite close (GOAWAY), as any HTTP/2 client does
 * when it is done; then whether a new connection is still answered. Deno's HTTP/2 server used
 * to abort the whole process on that GOAWAY.
 */
async function politeClose(url: string) {
  const call = (s: http2.ClientHttp2Session) =>
    new Promise<number>((resolve) => {
      const r = s.request({ ":path": "/", ":method": "GET" });
      let status = 0;
      r.on("response", (h) => status = Number(h[":status"]));
      r.on("data", () => {});
      r.on("close", () => resolve(status));
      r.on("error", () => {});
      r.end();
    });
  const s = http2.connect(url);
  s.on("error", () => {});
  const statuses = await Promise.all(Array.from({ length: 300 }, () => call(s)));
  await new Promise<void>((r) => s.close(() => r()));
  await sleep(1000);
  const again = http2.connect(url);
  again.on("error", () => {});
  const after = await Promise.race([call(again), sleep(5000).then(() => 0)]);
  again.destroy();
  return { calls: statuses.filter((x) => x > 0).length, answered_after: after > 0 };
}

/** The first reply or error on a link within `ms`: "open" when nothing came. */
async function outcome(link: SeamLink, ms: number): Promise<string> {
  const next = link.replies[Symbol.asyncIterator]().next().then(
    (r) => r.done ? "ended" : `reply ${r.value.status?.code ?? "ok"}: ${r.value.status?.message ?? ""}`,
    (e) => `refused: ${errorText(e)}`,
  );
  return await Promise.race([next, sleep(ms).then(() => "open")]);
}

/** A frame for a session no node has, with a 1 MB tensor. */
const bogus = (step: number, range: { start: number; end: number }) =>
  create(SeamFrameSchema, {
    schemaVersion: SCHEMA_VERSION,
    sessionId: "no-such-session",
    routeEpoch: 1n,
    range,
    artifactSha256: artifact,
    phase: Phase.DECODE,
    stepId: BigInt(step),
    positions: { start: step, count: 1 },
    cacheExpect: step,
    tensors: [packTensor("hidden_states", new Float32Array(1 << 18), [1, 1 << 18])],
  });

/** The hostile peer at the first node's port. */
async function seamAbuse() {
  const n0 = nodes[0];
  const port = Number(new URL(n0.url).port);
  const [start, end] = n0.layers.split(":").map(Number);
  const out: Record<string, unknown> = {};

  // 40 connections from 127.0.0.2 that say nothing: past 32 closed at once, the rest at the
  // preface deadline (10 s; counted once the other stages are done)
  const t0 = performance.now();
  const closedAt: number[] = [];
  const socks = Array.from({ length: 40 }, () => {
    const s = net.connect({ host: "127.0.0.1", port, localAddress: "127.0.0.2" });
    s.on("close", () => closedAt.push(performance.now() - t0));
    s.on("error", () => {});
    return s;
  });
  // (counted well before the deadline, so that a loaded machine's slow accepts do not count)
  await sleep(5000);
  const early = closedAt.length;

  // 1,100 streams on one connection: past 1,024 refused
  const mux = await MuxClient.connect(connDuplex(await Deno.connect({ hostname: "127.0.0.1", port })));
  const links = Array.from({ length: 1100 }, () => mux.dial());
  const outcomes = await Promise.all(links.map((l) => outcome(l, 8000)));
  out.streams = {
    dialed: links.length,
    refused: outcomes.filter((o) => /resource_exhausted/.test(o)).length,
    first_refused: outcomes.findIndex((o) => /resource_exhausted/.test(o)),
    open: outcomes.filter((o) => o === "open").length,
    refusal: outcomes.find((o) => /resource_exhausted/.test(o)),
  };
  mux.close();

  // 300 frames of 1 MB for a session the node does not have, sent as fast as they go, replies
  // never read
  const flooder = await MuxClient.connect(connDuplex(await Deno.connect({ hostname: "127.0.0.1", port })));
  const flood = flooder.dial();
  for (let i = 1; i <= 300; i++) flood.send(bogus(i, { start, end }));
  out.flood = { frames: 300, first_reply: await outcome(flood, 10_000) };
  await sleep(3000);
  flooder.close();

  // bytes that are no frame, and a header announcing 70 MB, on a raw connection
  out.raw = await rawAbuse(port);

  // sessions opened with tickets the tracker hands anyone who asks, never used; a forged
  // ticket; the first OPEN replayed once its session is gone
  const captured: SeamFrame[] = [];
  const dialer = await Dialer.connect(undefined, (_b, f) => {
    if (f.phase === Phase.OPEN && !f.open?.replyLink && f.range?.start === start) captured.push(f);
  });
  const t = trackerClient(trackerUrl);
  const idle: RouteSession[] = [];
  for (let i = 0; i < 4; i++) {
    const sessionId = crypto.randomUUID();
    const { routes } = await t.client.route({ artifactSha256: artifact, sessionId, count: 1 });
    const hops = routes[0].hops.map((h) => ({ url: h.url, range: h.range!, ticket: h.routeTicket }));
    idle.push(
      await RouteSession.open(dialer.dial, hops, {
        sessionId,
        epoch: routes[0].epoch,
        artifactSha256: artifact,
        kvCells: 64,
      }),
    );
  }
  t.close();
  const forged = create(SeamFrameSchema, captured[1]);
  forged.open!.routeTicket = forged.open!.routeTicket.slice();
  forged.open!.routeTicket[forged.open!.routeTicket.length - 1] ^= 0xff;
  const forgedLink = dialer.dial(n0.url);
  forgedLink.send(forged);
  out.forged_ticket = await outcome(forgedLink, 15_000);
  forgedLink.close();
  out.idle_sessions = { opened: idle.length, on_node_while_abuse: (await grpc.info(n0.url)).sessions };
  // the unused sessions go after UNUSED_MS: then the replay meets a session that ended
  await sleep(UNUSED_MS + 3000);
  const replayLink = dialer.dial(n0.url);
  replayLink.send(captured[0]);
  out.replayed_open = await outcome(replayLink, 15_000);
  replayLink.close();
  for (const s of idle) void s.cancel().catch(() => {});
  dialer.close();

  out.connections = {
    opened: socks.length,
    closed_within_5s: early,
    closed_by_now: closedAt.length,
    seconds_since: (performance.now() - t0) / 1000,
  };
  for (const s of socks) s.destroy();
  return out;
}

/** Raw fast-seam bytes: a stream given 5 bytes that are no frame, one given a 70 MB header. */
async function rawAbuse(port: number) {
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  const header = (len: number, channel: number, kind: number) => {
    const h = new Uint8Array(9);
    const v = new DataView(h.buffer);
    v.setUint32(0, len, true);
    v.setUint32(4, channel, true);
    v.setUint8(8, kind);
    return h;
  };
  const OPEN = 4, DATA = 1;
  const parts = [
    FAST_PREFACE,
    header(0, 1, OPEN),
    header(5, 1, DATA),
    new Uint8Array([1, 2, 3, 4, 5]),
    header(0, 2, OPEN),
    header(70 << 20, 2, DATA),
    new Uint8Array(4096),
  ];
  for (const p of parts) await c.write(p);
  const replies: Record<number, string[]> = { 1: [], 2: [] };
  const reader = new MessageReader((channel, kind, body) => {
    if (kind !== DATA || !replies[channel]) return;
    try {
      const f = fromBinary(SeamFrameSchema, body);
      replies[channel].push(`${f.status?.code}: ${f.status?.message}`);
    } catch {
      replies[channel].push("?");
    }
  }, () => {});
  const buf = new Uint8Array(1 << 16);
  let accepted = false;
  const until = Date.now() + 3000;
  while (Date.now() < until && (replies[1].length === 0 || replies[2].length === 0)) {
    const n = await Promise.race([c.read(buf), sleep(until - Date.now()).then(() => null)]);
    if (n === null) break;
    let chunk = buf.subarray(0, n);
    if (!accepted) {
      // the node's "ok" line first
      const nl = chunk.indexOf(10);
      if (nl < 0) continue;
      accepted = true;
      chunk = chunk.subarray(nl + 1);
    }
    reader.push(chunk.slice());
  }
  c.close();
  return { garbage: replies[1][0] ?? "nothing", oversized: replies[2][0] ?? "nothing" };
}

/** A peer with a relay token opens 1,100 channels to the first node through the relay. */
async function relayAbuse() {
  const peer = new RelayPeer(await connectRelay(relayUrl, await peerToken(relaySecret, MALLORY)), MALLORY);
  const links = Array.from({ length: 1100 }, () => peer.dial(nodes[0].name));
  const outcomes = await Promise.all(links.map((l) => outcome(l, 8000)));
  const during = await relayHealth();
  peer.close();
  return {
    dialed: links.length,
    refused: outcomes.filter((o) => /resource_exhausted/.test(o)).length,
    refusal: outcomes.find((o) => /resource_exhausted/.test(o)),
    relay_channels_during: during.channels,
  };
}

// ---- the runs ------------------------------------------------------------------------------
const report: Record<string, unknown> = { reference: ref.texts, unused_session_ms: UNUSED_MS };
try {
  // warm: the first chat after start pays for loading
  await honest();
  const before = { fds: fds(), relay: await relayHealth(), sessions: await nodeSessions() };
  const calm = await peaks(honest);
  report.calm = { ...calm.result, rss_mb: calm.rss_mb };

  const abused = await peaks(async () => {
    const floods = Promise.all([gatewayFlood(), slowloris()]);
    const peers = Promise.all([seamAbuse(), relayAbuse()]);
    const polite = Promise.all([politeClose(trackerUrl), politeClose(nodes[0].url)]);
    await sleep(1500);
    const h = await honest();
    // the peer's abuse runs past the honest chats (its replay waits for unused sessions to go)
    const [seams, relay] = await peers;
    const [tracker, node] = await polite;
    stop.now = true;
    const [flood, slow] = await floods;
    return {
      honest: h,
      hostile: { gateway_flood: flood, slowloris: slow, seams, relay, polite_close: { tracker, node } },
    };
  });
  report.abused = { ...abused.result.honest, rss_mb: abused.rss_mb };
  report.hostile = abused.result.hostile;

  // what the hostile side opened is freed: sessions, streams, sockets, relay channels
  await sleep(UNUSED_MS + 2000);
  report.freed = {
    before,
    after: { fds: fds(), relay: await relayHealth(), sessions: await nodeSessions() },
  };
} finally {
  grpc.close();
  await net_.stop();
}
console.log(JSON.stringify(report));
Deno.exit(0);
