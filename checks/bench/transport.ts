// What one seam crossing costs by transport alone: round trips of a decode step's hidden-state
// frame (2.3 KB) to an echo in another process, over the Strata seams (Connect/gRPC on HTTP/2,
// and the fast seam on the same port), a bare WebSocket and bare TCP; the machine idle, then with one core kept busy (as an engine keeps
// it during a route). Figures only.
import { WebSocket } from "ws";
import { encodeFrame } from "../../src/seam/frame.ts";
import type { SeamFrame } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { SeamLink } from "../../src/seam/link.ts";
import { FastSeams } from "../../server/seam/fast.ts";
import { GrpcSeams } from "../../server/seam/grpc.ts";
import { quantile } from "./route-throughput.ts";
import { hiddenStepFrame } from "./step-frame.ts";

const ROUNDS = 400;

async function timed(rounds: number, once: () => Promise<void>) {
  for (let i = 0; i < 50; i++) await once(); // warm-up
  const ms: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const t = performance.now();
    await once();
    ms.push(performance.now() - t);
  }
  return { p50_ms: quantile(ms, 0.5), p95_ms: quantile(ms, 0.95) };
}

/** Round trips of one frame on one long-lived seam stream, as a Route Session uses it. */
async function seamRounds(link: SeamLink, f: SeamFrame) {
  const replies = link.replies[Symbol.asyncIterator]();
  const r = await timed(ROUNDS, async () => {
    link.send(f);
    await replies.next();
  });
  link.close();
  return r;
}

async function measure(ports: { grpc: string; ws: string; tcp: number }, nEmbd: number) {
  const f = hiddenStepFrame(nEmbd);
  const bytes = encodeFrame(f);
  const seams = new GrpcSeams();
  const grpc = await seamRounds(seams.dial(ports.grpc), f);
  // the fast seam on the same port: frames as encoded, a 9-byte header, one TCP connection
  const fast = new FastSeams((u) => seams.dial(u));
  const fastLink = fast.dial(ports.grpc);
  const fastSeam = await seamRounds(fastLink, f);
  const fastTransport = fastLink.transport;
  fast.close();
  seams.close();
  // one WebSocket
  const ws = new WebSocket(ports.ws);
  await new Promise((r) => ws.once("open", r));
  const wsRound = await timed(ROUNDS, () =>
    new Promise<void>((r) => {
      ws.once("message", () => r());
      ws.send(bytes);
    }));
  ws.close();
  // plain TCP, length known
  const c = await Deno.connect({ hostname: "127.0.0.1", port: ports.tcp });
  c.setNoDelay(true);
  const buf = new Uint8Array(bytes.length);
  const tcp = await timed(ROUNDS, async () => {
    await c.write(bytes);
    for (let got = 0; got < bytes.length;) got += (await c.read(buf.subarray(got))) ?? bytes.length;
  });
  c.close();
  if (fastTransport !== "tcp") throw new Error(`the fast seam fell back to ${fastTransport}`);
  return { frame_bytes: bytes.length, grpc_http2: grpc, fast_seam: fastSeam, websocket: wsRound, tcp };
}

export async function benchTransport(nEmbd = 576) {
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
  const ports = JSON.parse(line.trim());
  try {
    const idle = await measure(ports, nEmbd);
    // one core busy, as an engine keeps it while a route runs
    const busy = new Deno.Command("sh", { args: ["-c", "while :; do :; done"], stdout: "null" }).spawn();
    try {
      const loaded = await measure(ports, nEmbd);
      return { round_trips: ROUNDS, idle, one_core_busy: loaded };
    } finally {
      busy.kill("SIGKILL");
      await busy.status;
    }
  } finally {
    echo.kill("SIGTERM");
    await echo.status;
  }
}
