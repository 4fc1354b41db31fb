// What one seam crossing costs by transport alone: round trips of a decode step's hidden-state
// frame (2.3 KB) to an echo in another process, over the Strata seams (Connect/gRPC on HTTP/2,
// and the fast seam on the same port, each in plaintext and over TLS), a bare WebSocket and
// bare TCP; the machine idle, then with one core kept busy (as an engine keeps it during a
// route). Figures only; what TLS adds to one crossing is half the difference of round trips.
// Then the same after the sender idled as a shard idles in a route while the other computes:
// the code on a crossing's path runs cold there, and costs several times what a loop shows.
import { WebSocket } from "ws";
import { decodeFrame, encodeFrame } from "../../src/seam/frame.ts";
import { ElementType, type SeamFrame } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { SeamLink } from "../../src/seam/link.ts";
import { FastSeams } from "../../node-apis/seam/fast.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { quantile } from "./route-throughput.ts";
import { hiddenStepFrame } from "./step-frame.ts";
import { trustNetworkCa } from "../../node-apis/tls/trust.ts";
import { unpackTensor } from "../../src/seam/tensor.ts";

const ROUNDS = 400;

/** each call timed, after the process slept `gapMs` first when given (0: back to back) */
export async function timed(rounds: number, once: () => Promise<void> | void, gapMs = 0) {
  for (let i = 0; i < 50; i++) await once(); // warm-up
  const ms: number[] = [];
  for (let i = 0; i < rounds; i++) {
    if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
    const t = performance.now();
    await once();
    ms.push(performance.now() - t);
  }
  return { p50_ms: quantile(ms, 0.5), p95_ms: quantile(ms, 0.95) };
}

/**
 * Round trips on several seam streams taken in turn, one each per round: plaintext and TLS
 * meet the same moments of the machine's noise.
 */
async function interleaved(links: SeamLink[], f: SeamFrame) {
  const its = links.map((l) => l.replies[Symbol.asyncIterator]());
  const once = async (i: number) => {
    links[i].send(f);
    await its[i].next();
  };
  for (let w = 0; w < 50; w++) for (const i of links.keys()) await once(i); // warm-up
  const ms = links.map(() => [] as number[]);
  for (let r = 0; r < ROUNDS; r++) {
    for (const i of links.keys()) {
      const t = performance.now();
      await once(i);
      ms[i].push(performance.now() - t);
    }
  }
  for (const l of links) l.close();
  return ms.map((xs) => ({ p50_ms: quantile(xs, 0.5), p95_ms: quantile(xs, 0.95) }));
}

/** gRPC, then the fast seam, each to the plaintext and the TLS seam server at once */
async function seamPairs(plainUrl: string, tlsUrl: string, f: SeamFrame) {
  const seams = new GrpcSeams();
  const [grpc, grpcTls] = await interleaved([seams.dial(plainUrl), seams.dial(tlsUrl)], f);
  // the fast seam on the same port: frames as encoded, a 9-byte header, one connection
  const fast = new FastSeams((u) => seams.dial(u));
  const links = [fast.dial(plainUrl), fast.dial(tlsUrl)];
  const [fastPlain, fastTls] = await interleaved(links, f);
  if (links[0].transport !== "tcp" || links[1].transport !== "tls") {
    throw new Error(`the fast seam fell back: ${links.map((l) => l.transport).join(", ")}`);
  }
  fast.close();
  seams.close();
  return { grpc, grpcTls, fast: fastPlain, fastTls };
}

/** how long a shard of a route of 2 idles between steps here (about half an engine step) */
export const IDLE_GAP_MS = 7;
const IDLE_ROUNDS = 200;

/** One round trip of `bytes` on plain TCP to the echo (length known). */
export async function tcpRoundTrip(port: number, bytes: Uint8Array) {
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  c.setNoDelay(true);
  const buf = new Uint8Array(bytes.length);
  const once = async () => {
    await c.write(bytes);
    for (let got = 0; got < bytes.length;) got += (await c.read(buf.subarray(got))) ?? bytes.length;
  };
  return { once, close: () => c.close() };
}

/**
 * The fast seam, plain TCP and the codec (encode; decode with the tensor's check) back to back
 * and each after an idle gap: what running a crossing's code cold costs.
 */
async function measureAfterIdle(ports: { grpc: string; tcp: number }, nEmbd: number) {
  const f = hiddenStepFrame(nEmbd);
  const bytes = encodeFrame(f);
  const want = { name: "hidden_states", elementType: ElementType.F32 as const, cols: nEmbd, rows: 1 };
  const seams = new GrpcSeams();
  const fast = new FastSeams((u) => seams.dial(u));
  const link = fast.dial(ports.grpc);
  const replies = link.replies[Symbol.asyncIterator]();
  const fastRound = async () => {
    link.send(f);
    await replies.next();
  };
  const tcp = await tcpRoundTrip(ports.tcp, bytes);
  const encode = () => void encodeFrame(f);
  const decode = () => void unpackTensor(decodeFrame(bytes).tensors[0], want);
  const both = async (gap: number) => ({
    fast_seam: await timed(IDLE_ROUNDS, fastRound, gap),
    tcp: await timed(IDLE_ROUNDS, tcp.once, gap),
    encode: await timed(IDLE_ROUNDS, encode, gap),
    decode: await timed(IDLE_ROUNDS, decode, gap),
  });
  try {
    return { gap_ms: IDLE_GAP_MS, back_to_back: await both(0), after_gap: await both(IDLE_GAP_MS) };
  } finally {
    link.close();
    fast.close();
    seams.close();
    tcp.close();
  }
}

/** half a round trip's difference: one crossing's share, ms */
const perCrossing = (tls: { p50_ms: number }, plain: { p50_ms: number }) => (tls.p50_ms - plain.p50_ms) / 2;

async function measure(ports: { grpc: string; tls: string; ws: string; tcp: number }, nEmbd: number) {
  const f = hiddenStepFrame(nEmbd);
  const bytes = encodeFrame(f);
  const seams = await seamPairs(ports.grpc, ports.tls, f);
  // one WebSocket
  const ws = new WebSocket(ports.ws);
  await new Promise((r) => ws.once("open", r));
  const wsRound = await timed(ROUNDS, () =>
    new Promise<void>((r) => {
      ws.once("message", () => r());
      ws.send(bytes);
    }));
  ws.close();
  const tcpLink = await tcpRoundTrip(ports.tcp, bytes);
  const tcp = await timed(ROUNDS, tcpLink.once);
  tcpLink.close();
  return {
    frame_bytes: bytes.length,
    grpc_http2: seams.grpc,
    fast_seam: seams.fast,
    grpc_http2_tls: seams.grpcTls,
    fast_seam_tls: seams.fastTls,
    tls_ms_per_crossing: {
      fast_seam: perCrossing(seams.fastTls, seams.fast),
      grpc: perCrossing(seams.grpcTls, seams.grpc),
    },
    websocket: wsRound,
    tcp,
  };
}

/** The echo process (transport-echo.ts): its ports, its pid, and its end. */
export async function startEcho() {
  const echo = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--quiet",
      "--config",
      new URL("../../deno.json", import.meta.url).pathname,
      new URL("./transport-echo.ts", import.meta.url).pathname,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = echo.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let line = "";
  while (!line.includes("\n")) line += (await reader.read()).value ?? "";
  const ports = JSON.parse(line.trim()) as { grpc: string; tls: string; ws: string; tcp: number; ca: string };
  return {
    ports,
    pid: echo.pid,
    close: async () => {
      echo.kill("SIGTERM");
      await echo.status;
    },
  };
}

export async function benchTransport(nEmbd = 576) {
  const { ports, close } = await startEcho();
  // this process trusts the echo's CA alone from here on (the bench dials nothing else over TLS)
  trustNetworkCa(ports.ca);
  try {
    const idle = await measure(ports, nEmbd);
    const afterIdle = await measureAfterIdle(ports, nEmbd);
    // one core busy, as an engine keeps it while a route runs
    const busy = new Deno.Command("sh", { args: ["-c", "while :; do :; done"], stdout: "null" }).spawn();
    try {
      const loaded = await measure(ports, nEmbd);
      return { round_trips: ROUNDS, idle, one_core_busy: loaded, after_idle: afterIdle };
    } finally {
      busy.kill("SIGKILL");
      await busy.status;
    }
  } finally {
    await close();
  }
}
