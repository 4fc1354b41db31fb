// A Strata route of node processes on loopback (direct seams: the fast seam unless
// STRATA_SEAM_TRANSPORT=grpc), driven as one Route Session: its figures, each node's share of a
// decode step, and where the rest of the step goes; then the aggregate of n sessions at once.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { ElementType, type NodeTelemetry } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { StepReply } from "../../src/route/route-session.ts";
import { decodeFrame, encodeFrame } from "../../src/seam/frame.ts";
import { unpackTensor } from "../../src/seam/tensor.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { type LocalRoute, startLocalRoute } from "../hosts/local-route.ts";
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
  /**
   * sessions at once measured on these nodes and on nodes without cohorts (in lockstep), runs
   * of the two taken in turns so that the machine's drift falls on both alike
   */
  readonly lockstep?: readonly number[];
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
  /** the nodes' encode + decode of the frames a step carries, as they timed it in flight */
  readonly seam_codec_ms: number;
  /** one hidden-state frame's encode, decode, check and unpack, timed alone (a cross-check) */
  readonly codec_ms_per_frame_alone: number;
  /** what is left: framing, the socket, loopback, event-loop wake-ups, the driver's own frames */
  readonly transport_ms: number;
  /** as counted on the replies: hops + 1 with the last shard's reply link */
  readonly one_way_crossings: number;
  /** what one crossing costs beyond the engines: (step − engine − scheduling) / crossings, p50 */
  readonly crossing_ms_p50: number;
  /** what carried the step: the driver's link to the first shard, then each node's link on */
  readonly transports: string[];
  /** each crossing in route order, from the sender's stamp to the receiver's (one clock), p50 */
  readonly crossing_ms_by_link: number[];
  /** each node's own time around the engine (take the frame, check, unpack, pack, send), p50 */
  readonly node_ms_beyond_engine: number[];
}

export async function measureRoute(o: RouteMeasureOptions) {
  const local = await startRoute(o, true);
  try {
    // warm-up as long as the measurement: the seam path's JavaScript reaches V8's optimizing tier
    await decodeRun(local, 1, o.decodeTokens, "warmup");
    const { openMs, ttft, replies } = await routeSession(
      local,
      "bench-one",
      prompt(o.promptTokens, 0),
      o.decodeTokens,
    );
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

    const crossings = quantile(replies.map((x) => x.crossings), 0.5);
    const codec = quantile(replies.map((x) => x.telemetry.reduce((s, t) => s + t.codecMs, 0)), 0.5);
    const engine = compute.reduce((a, b) => a + b, 0);
    const scheduling = queue.reduce((a, b) => a + b, 0);
    const step = quantile(stepMs, 0.5);
    const beyond = replies.map(crossingMsOf);
    const last = replies[replies.length - 1];
    const profile: StepProfile = {
      step_ms: step,
      engine_ms: engine,
      scheduling_ms: scheduling,
      seam_codec_ms: codec,
      codec_ms_per_frame_alone: codecMs(o.nEmbd),
      transport_ms: Math.max(0, step - engine - scheduling - codec),
      one_way_crossings: crossings,
      crossing_ms_p50: quantile(beyond, 0.5),
      transports: [last.transport.first, ...last.telemetry.toReversed().map((t) => t.transport)],
      ...stamped(replies),
    };

    const concurrency = await sweep(local, o.concurrency, o.decodeTokens);
    return {
      ...f,
      open_ms: openMs,
      nodes,
      seam_bytes_per_token: seamBytes,
      profile,
      concurrency,
      concurrency_lockstep: await lockstepPairs(o, local),
    };
  } finally {
    await local.close();
  }
}

/** The nodes' engine time in a step (their compute and the last one's sampling), ms. */
export const engineMsOf = (r: StepReply) => r.telemetry.reduce((s, t) => s + t.computeMs + t.sampleMs, 0);

/** What one crossing of a step cost beyond the engines: (step − engine − scheduling) / crossings, ms. */
export const crossingMsOf = (r: StepReply) =>
  (r.ms - engineMsOf(r) - r.telemetry.reduce((s, t) => s + t.queueMs, 0)) / r.crossings;

/**
 * One session on a route: opened, the prompt, then `steps` decode steps, each timed at the
 * driver; the prefill's reply and every step's.
 */
export async function routeSession(local: LocalRoute, id: string, promptIds: Int32Array, steps: number) {
  const tOpen = performance.now();
  const session = await local.route.open(id, { kvCells: promptIds.length + steps + 1 });
  const openMs = performance.now() - tOpen;
  try {
    const t0 = performance.now();
    const first = await session.prefill(promptIds);
    const ttft = performance.now() - t0;
    const replies: StepReply[] = [];
    let r = first;
    for (let i = 0; i < steps; i++) {
      r = await session.decode(r.token);
      replies.push(r);
    }
    return { openMs, ttft, first, replies };
  } finally {
    await session.release();
  }
}

function startRoute(o: RouteMeasureOptions, cohorts: boolean) {
  return startLocalRoute({
    modelPath: o.modelPath,
    split: o.split,
    nLayer: o.nLayer,
    backend: o.backend,
    threads: o.threads,
    transport: "direct",
    maxSessions: Math.max(16, ...o.concurrency, ...o.lockstep ?? []),
    cohorts,
  });
}

/** Aggregate decode of n sessions at once, for each n; how many sessions a node batched at most. */
async function sweep(local: LocalRoute, counts: readonly number[], tokens: number) {
  const out = [];
  for (const n of counts) {
    const run = await decodeRun(local, n, tokens, `c${n}`);
    out.push({
      sessions: n,
      aggregate_tps: run.tokPerS,
      max_batch_sessions: Math.max(
        ...run.replies.map((x) => Math.max(...x.telemetry.map((t) => t.batchSessions))),
      ),
    });
  }
  return out;
}

/** Runs of each side of a pair, taken in turns. */
const PAIRED_RUNS = 3;

/**
 * What turns gain: n sessions on the cohort route and on nodes that batch every ready step at
 * once (no cohorts), a run of each in turn, medians of each side.
 */
async function lockstepPairs(o: RouteMeasureOptions, cohorts: LocalRoute) {
  if (!o.lockstep?.length) return [];
  const lockstep = await startRoute(o, false);
  try {
    await decodeRun(lockstep, 1, o.decodeTokens, "warmup");
    const out = [];
    for (const n of o.lockstep) {
      const runs: { cohorts: number; lockstep: number }[] = [];
      let maxBatch = 0;
      for (let r = 0; r < PAIRED_RUNS; r++) {
        const [a] = await sweep(cohorts, [n], o.decodeTokens);
        const [b] = await sweep(lockstep, [n], o.decodeTokens);
        runs.push({ cohorts: a.aggregate_tps, lockstep: b.aggregate_tps });
        maxBatch = Math.max(maxBatch, b.max_batch_sessions);
      }
      out.push({
        sessions: n,
        aggregate_tps: quantile(runs.map((x) => x.lockstep), 0.5),
        cohorts_tps: quantile(runs.map((x) => x.cohorts), 0.5),
        max_batch_sessions: maxBatch,
        runs,
      });
    }
    return out;
  } finally {
    await lockstep.close();
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

/** Crossing by crossing and node by node, from the send and receive stamps on one clock. */
function stamped(replies: StepReply[]) {
  const links: number[][] = [];
  const nodes: number[][] = [];
  for (const r of replies) {
    const hops = r.telemetry.toReversed(); // route order
    const sent = [r.sentUnixMs, ...hops.map((t) => t.sentUnixMs)];
    const received = [...hops.map((t) => t.receivedUnixMs), r.receivedUnixMs];
    sent.forEach((s, i) => (links[i] ??= []).push(received[i] - s));
    hops.forEach((t, i) =>
      (nodes[i] ??= []).push(t.sentUnixMs - t.receivedUnixMs - t.queueMs - t.computeMs - t.sampleMs)
    );
  }
  return {
    crossing_ms_by_link: links.map((xs) => quantile(xs, 0.5)),
    node_ms_beyond_engine: nodes.map((xs) => quantile(xs, 0.5)),
  };
}
