// A Strata route of node processes on loopback (direct HTTP/2 seams), driven as one Route
// Session: its figures, each node's share of a decode step, and where the rest of the step
// goes; then the aggregate of n sessions at once.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { ElementType, type NodeTelemetry } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { StepReply } from "../../src/route/route-session.ts";
import { decodeFrame, encodeFrame } from "../../src/seam/frame.ts";
import { unpackTensor } from "../../src/seam/tensor.ts";
import type { NativeBackend } from "../../server/engine/native/build.ts";
import { startLocalRoute } from "../hosts/local-route.ts";
import { type EngineFigures, figures, rssOf } from "./figures.ts";
import { decodeRun, prompt, quantile } from "./route-throughput.ts";
import { hiddenStepFrame } from "./step-frame.ts";

export interface RouteMeasureOptions {
  readonly modelPath: string;
  readonly split: readonly LayerRange[];
  readonly nLayer: number;
  readonly nEmbd: number;
  readonly backend: NativeBackend;
  readonly threads: number;
  readonly promptTokens: number;
  readonly decodeTokens: number;
  /** sessions at once for the aggregate sweep (empty: no sweep) */
  readonly concurrency: readonly number[];
}

export interface NodeShare {
  readonly layers: string;
  readonly compute_ms_per_token: number;
  readonly queue_ms_per_token: number;
  readonly rss_mb: number;
}

/** Where one decode step's time goes, p50 over the steps. */
export interface StepProfile {
  readonly step_ms: number;
  readonly engine_ms: number;
  readonly scheduling_ms: number;
  /** encode + decode of every frame the step sends and receives, timed on their own */
  readonly seam_codec_ms: number;
  /** what is left: HTTP/2 framing, loopback, event-loop wake-ups */
  readonly transport_ms: number;
  readonly one_way_crossings: number;
}

export async function measureRoute(o: RouteMeasureOptions) {
  const local = await startLocalRoute({
    modelPath: o.modelPath,
    split: o.split,
    nLayer: o.nLayer,
    backend: o.backend,
    threads: o.threads,
    transport: "direct",
    maxSessions: Math.max(16, ...o.concurrency),
  });
  try {
    // warm-up as long as the measurement: the seam path's JavaScript reaches V8's optimizing tier
    await decodeRun(local, 1, o.decodeTokens, "warmup");
    const tOpen = performance.now();
    const session = await local.route.open("bench-one", { kvCells: o.promptTokens + o.decodeTokens + 1 });
    const openMs = performance.now() - tOpen;
    const t0 = performance.now();
    let r = await session.prefill(prompt(o.promptTokens, 0));
    const ttft = performance.now() - t0;
    const replies: StepReply[] = [];
    for (let i = 0; i < o.decodeTokens; i++) {
      r = await session.decode(r.token);
      replies.push(r);
    }
    await session.release();
    const rss = await Promise.all(local.nodes.map((n) => rssOf(n.child.pid)));
    const stepMs = replies.map((x) => x.ms);
    const perNode = (f: (t: NodeTelemetry) => number) =>
      o.split.map((_, i) =>
        replies.reduce((s, x) => {
          // telemetry comes last shard first
          const t = x.telemetry[o.split.length - 1 - i];
          return s + (t ? f(t) : 0);
        }, 0) / replies.length
      );
    const compute = perNode((t) => t.computeMs + t.sampleMs);
    const queue = perNode((t) => t.queueMs);
    const nodes: NodeShare[] = o.split.map((range, i) => ({
      layers: `${range.start}:${range.end}`,
      compute_ms_per_token: compute[i],
      queue_ms_per_token: queue[i],
      rss_mb: rss[i] / 2 ** 20,
    }));
    const seamBytes = replies.reduce((s, x) => s + x.telemetry.reduce((a, t) => a + t.bytesOut, 0), 0) /
      replies.length;
    const f: EngineFigures = figures(o.promptTokens, ttft, stepMs, rss.reduce((a, b) => a + b, 0));

    const crossings = 2 * o.split.length;
    // the hidden-state frames a step sends (one per inner seam); token and reply frames are tiny
    const codec = codecMs(o.nEmbd) * (o.split.length - 1);
    const engine = compute.reduce((a, b) => a + b, 0);
    const scheduling = queue.reduce((a, b) => a + b, 0);
    const step = quantile(stepMs, 0.5);
    const profile: StepProfile = {
      step_ms: step,
      engine_ms: engine,
      scheduling_ms: scheduling,
      seam_codec_ms: codec,
      transport_ms: Math.max(0, step - engine - scheduling - codec),
      one_way_crossings: crossings,
    };

    const concurrency = [];
    for (const n of o.concurrency) {
      const run = await decodeRun(local, n, o.decodeTokens, `c${n}`);
      concurrency.push({
        sessions: n,
        aggregate_tps: run.tokPerS,
        max_batch_sessions: Math.max(
          ...run.replies.map((x) => Math.max(...x.telemetry.map((t) => t.batchSessions))),
        ),
      });
    }
    return { ...f, open_ms: openMs, nodes, seam_bytes_per_token: seamBytes, profile, concurrency };
  } finally {
    await local.close();
  }
}

/**
 * Encoding and decoding one decode step's hidden-state frame (one row of n_embd f32, with
 * its CRC check and unpacking), timed apart from any transport: the codec's share of a
 * crossing.
 */
function codecMs(nEmbd: number): number {
  const frame = hiddenStepFrame(nEmbd);
  const want = { name: "hidden_states", elementType: ElementType.F32 as const, cols: nEmbd, rows: 1 };
  const rounds = 2000;
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) unpackTensor(decodeFrame(encodeFrame(frame)).tensors[0], want);
  return (performance.now() - t0) / rounds;
}
