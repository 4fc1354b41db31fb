// Decode throughput of a route of node processes: one session alone, then N sessions at
// once (aggregate), beside whole-model llama.cpp in one process; and what the seams cost
// per decode step per hop (the driver's round trip minus every node's queue, engine and
// sampling time). Prints figures; asserts nothing.
import { formatRange, parseSplit } from "../../src/engine/layer-range.ts";
import type { RouteSession, StepReply } from "../../src/route/route-session.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { fileFacts } from "../../server/model/facts.ts";
import { type LocalRoute, startLocalRoute, type Transport } from "../hosts/local-route.ts";
import { EngineProcess } from "../engine-host/engine-process.ts";
import type { SeqId } from "../../src/engine/range-engine.ts";

export interface RouteBenchOptions {
  readonly modelPath: string;
  readonly modelName: string;
  readonly split: string;
  readonly backend: NativeBackend;
  readonly transport: Transport;
  readonly sessions: number;
  readonly tokens: number;
  readonly threads: number;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

export const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

/** A prompt of n plain tokens (ids chosen from the ordinary range of the vocabulary). */
export const prompt = (n: number, salt: number) =>
  Int32Array.from({ length: n }, (_, i) => 1000 + ((i * 7919 + salt * 104729) % 20000));

export async function benchRoute(o: RouteBenchOptions) {
  const facts = await fileFacts(o.modelPath);
  const split = parseSplit(o.split, facts.nLayer);
  // the route's nodes together get threads × nodes; the whole model gets as many
  const wholeOpts = { ...o, threads: o.threads * split.length };
  const whole = await wholeDecode(wholeOpts, 1);
  const wholeMany = await wholeDecode(wholeOpts, o.sessions);
  const local = await startLocalRoute({
    modelPath: o.modelPath,
    split,
    nLayer: facts.nLayer,
    backend: o.backend,
    threads: o.threads,
    transport: o.transport,
    maxSessions: Math.max(16, o.sessions),
  });
  try {
    await decodeRun(local, 1, 8, "warmup");
    const one = await decodeRun(local, 1, o.tokens, "one");
    const many = await decodeRun(local, o.sessions, o.tokens, "many");
    // seam cost of one step: the round trip minus what the nodes spent on it
    const overhead = one.replies.map((r) =>
      r.ms - r.telemetry.reduce((s, t) => s + t.queueMs + t.computeMs + t.sampleMs, 0)
    );
    // hops: driver → first node, then node → node, and the last shard's reply straight back: a
    // step crosses hops + 1 one-way seams (2 × hops where replies climb back), as counted
    const hops = split.length;
    const perHop = overhead.map((x) => x / hops);
    const perCrossing = overhead.map((x, i) => x / one.replies[i].crossings);
    const bytesPerToken = one.replies[0].telemetry.reduce((s, t) => s + t.bytesOut, 0);
    return {
      model: o.modelName,
      split: split.map(formatRange).join(","),
      transport: o.transport,
      backend: `native-${o.backend}`,
      threads_per_node: o.threads,
      tokens_per_session: o.tokens,
      whole_model_decode_tok_s: whole,
      whole_model_n_sessions_batched_tok_s: wholeMany,
      whole_model_ratio_n_vs_1: wholeMany / whole,
      route_1_session_decode_tok_s: one.tokPerS,
      route_n_sessions: o.sessions,
      route_n_sessions_aggregate_tok_s: many.tokPerS,
      aggregate_ratio_n_vs_1: many.tokPerS / one.tokPerS,
      route_vs_whole_1_session: one.tokPerS / whole,
      max_batch_sessions_seen: Math.max(
        ...many.replies.map((r) => Math.max(...r.telemetry.map((t) => t.batchSessions))),
      ),
      // each node's engine call per step: 1 is one pass over the weights for the whole batch
      graph_passes_per_call: mean(many.replies.flatMap((r) => r.telemetry.map((t) => t.batchPasses))),
      step_ms_p50: quantile(one.replies.map((r) => r.ms), 0.5),
      step_ms_p95: quantile(one.replies.map((r) => r.ms), 0.95),
      seam_overhead_per_step_per_hop_ms: { p50: quantile(perHop, 0.5), p95: quantile(perHop, 0.95) },
      seam_overhead_per_one_way_crossing_ms: {
        p50: quantile(perCrossing, 0.5),
        p95: quantile(perCrossing, 0.95),
      },
      seam_bytes_per_decode_token: bytesPerToken,
    };
  } finally {
    await local.close();
  }
}

/** n sessions prefill, meet, then decode `tokens` steps each; aggregate decode tokens per second. */
export async function decodeRun(local: LocalRoute, n: number, tokens: number, tag: string) {
  const sessions: RouteSession[] = [];
  const firsts: StepReply[] = [];
  for (let s = 0; s < n; s++) {
    const p = prompt(16 + 4 * s, s);
    const session = await local.route.open(`bench-${tag}-${s}`, { kvCells: p.length + tokens + 1 });
    sessions.push(session);
    firsts.push(await session.prefill(p));
  }
  const replies: StepReply[] = [];
  const t0 = performance.now();
  await Promise.all(sessions.map(async (session, s) => {
    let token = firsts[s].token;
    for (let i = 0; i < tokens; i++) {
      const r = await session.decode(token);
      replies.push(r);
      token = r.token;
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(sessions.map((s) => s.release()));
  return { tokPerS: (n * tokens) / seconds, replies };
}

/**
 * Whole-model llama.cpp in one process: decode tokens per second of n sessions stepped
 * together in one batch per step (n = 1: one session alone).
 */
export async function wholeDecode(o: WholeDecodeOptions, n: number): Promise<number> {
  const [rate] = await wholeDecodeAtOnce(o, n, 1);
  return rate;
}

type WholeDecodeOptions = Pick<RouteBenchOptions, "modelPath" | "tokens" | "threads" | "backend">;

/**
 * `processes` whole-model processes stepping n sessions each, all at the same time: each one's
 * decode tokens per second. Two of them at 4 sessions do a route of 2's engine work for 8
 * sessions in two cohorts, with no seams: the most such a route can give on this machine.
 */
export async function wholeDecodeAtOnce(
  o: WholeDecodeOptions,
  n: number,
  processes: number,
): Promise<number[]> {
  const all: EngineProcess[] = [];
  try {
    for (let k = 0; k < processes; k++) all.push(await spawnBatchedWhole(o, n));
    const prompts = Array.from({ length: n }, (_, s) => prompt(16 + 4 * s, s));
    const ready = [];
    for (const p of all) ready.push(await prefilled(p, prompts));
    return await Promise.all(ready.map((r) => stepTogether(r, o.tokens)));
  } finally {
    await Promise.all(all.map((p) => p.close()));
  }
}

/**
 * A whole-model process for n sessions at once, each with room for one of the prompts
 * `prompt(16 + 4 s, s)` for s below `prompts` and then `o.tokens` steps.
 */
export function spawnBatchedWhole(o: WholeDecodeOptions, n: number, prompts = n): Promise<EngineProcess> {
  return EngineProcess.spawn({
    modelPath: o.modelPath,
    range: "whole",
    kvCells: n * (16 + 4 * prompts + o.tokens + 16),
    maxSequences: n,
    batchTokens: 512,
    threads: o.threads,
    backend: o.backend,
  });
}

export interface Prefilled {
  readonly p: EngineProcess;
  readonly seqs: SeqId[];
  readonly at: number[];
  next: number[];
}

/** A session opened and prefilled for each prompt, one after another, greedy. */
export async function prefilled(p: EngineProcess, prompts: readonly Int32Array[]): Promise<Prefilled> {
  const last = (k: number) => Uint8Array.from({ length: k }, (_, i) => (i === k - 1 ? 1 : 0));
  const out: Prefilled = { p, seqs: [], at: [], next: [] };
  for (const tokens of prompts) {
    const seq = await p.open();
    const r = await p.decodeGreedy(
      tokens,
      Int32Array.from(tokens.keys()),
      new Int32Array(tokens.length).fill(seq),
      last(tokens.length),
    );
    out.seqs.push(seq);
    out.at.push(tokens.length);
    out.next.push(r.tokens[0]);
  }
  return out;
}

/** Steps every session together, greedy: tokens a second by the shard process's own step times. */
export async function stepTogether(x: Prefilled, steps: number): Promise<number> {
  const n = x.seqs.length;
  // the shard process's own step times (engine and greedy picks), not the pipe to it
  let ms = 0;
  for (let i = 0; i < steps; i++) {
    const r = await x.p.decodeGreedy(
      Int32Array.from(x.next),
      Int32Array.from(x.at),
      Int32Array.from(x.seqs),
      new Uint8Array(n).fill(1),
    );
    ms += r.ms;
    x.next = r.tokens;
    for (let s = 0; s < n; s++) x.at[s]++;
  }
  return (n * steps) / (ms / 1000);
}

export function printRouteBench(r: Awaited<ReturnType<typeof benchRoute>>): string {
  const f = (x: number, d = 1) => x.toFixed(d);
  return [
    `${r.model} split ${r.split}, ${r.transport} seams, ${r.backend}, ${r.threads_per_node} thread(s) a node, ${r.tokens_per_session} decode steps a session`,
    `whole model, 1 session:           ${f(r.whole_model_decode_tok_s)} tok/s`,
    `whole model, ${r.route_n_sessions} sessions batched:   ${
      f(r.whole_model_n_sessions_batched_tok_s)
    } tok/s (${f(r.whole_model_ratio_n_vs_1, 2)}× one session: the engine's own batching gain here)`,
    `route, 1 session:                 ${f(r.route_1_session_decode_tok_s)} tok/s (${
      f(r.route_vs_whole_1_session, 2)
    }× whole)`,
    `route, ${r.route_n_sessions} sessions (aggregate):     ${f(r.route_n_sessions_aggregate_tok_s)} tok/s (${
      f(r.aggregate_ratio_n_vs_1, 2)
    }× one session; up to ${r.max_batch_sessions_seen} a batch, ${
      f(r.graph_passes_per_call, 2)
    } graph passes a call)`,
    `decode step round trip:           p50 ${f(r.step_ms_p50, 2)} ms, p95 ${f(r.step_ms_p95, 2)} ms`,
    `seam overhead per step per hop:   p50 ${f(r.seam_overhead_per_step_per_hop_ms.p50, 3)} ms, p95 ${
      f(r.seam_overhead_per_step_per_hop_ms.p95, 3)
    } ms`,
    `  one way (encode+send+decode):   p50 ${f(r.seam_overhead_per_one_way_crossing_ms.p50, 3)} ms, p95 ${
      f(r.seam_overhead_per_one_way_crossing_ms.p95, 3)
    } ms`,
    `seam bytes per decode token:      ${r.seam_bytes_per_decode_token}`,
  ].join("\n");
}
