// A model bigger than any participant, measured: a synthetic llama of `size` (6 GB by
// default), certified under the cap, served by `strata up --memory-cap` with a headless tab,
// a Deno WASM node and native nodes (the mixed route), then by native nodes alone on the same
// ranges (the all-native route), each beside the whole model in one node process.
//
// Every lane is measured alike: its own `strata up` network, chats through its gateway, decode
// only on this process's clock (chat-rates.ts), the same prompts and token counts, the same
// sessions admitted at once (the fewest any stage of the route takes), the same KV cells a
// native node. The whole model runs with as many engine threads as the machine has cores; a
// route's nodes run `threads` each and share those cores. A 6 GB network takes minutes to
// start, so the whole model's network stays up throughout and takes turns with each route's:
// round by round one session on each, then `sessions` on each, the lane that goes first
// alternating; the figures are medians of the rounds. Each route is also set against its
// pipeline ceiling (pipeline-ceiling.ts). Prints figures; asserts nothing.
import { formatRange, layerRange, parseLayerRange } from "../../src/engine/layer-range.ts";
import { referenceBeside } from "../../server/model/reference-file.ts";
import { fileFacts } from "../../server/model/facts.ts";
import { cacheDir } from "../../server/process/paths.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { type Network, up } from "../../server/up/up.ts";
import type { UpOptions } from "../../server/up/plane.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { PARITY_QUESTIONS } from "../parity/prompts.ts";
import { admitted, chatDecodeTps, decodeTpsTogether } from "./chat-rates.ts";
import { oneSessionCeiling, pipelineCeiling, type StageCost, stepMsAt } from "./pipeline-ceiling.ts";
import { quantile } from "./route-throughput.ts";
import { type TimedChat, timedChat } from "./timed-chat.ts";

export interface BigBenchOptions {
  readonly sizeBytes: number;
  readonly capBytes: number;
  readonly sessions: number;
  readonly newTokens: number;
  /** engine threads of each route node (the whole model gets every core) */
  readonly threads: number;
  /** rounds in turns in each route's window */
  readonly rounds: number;
}

/** One stage of a lane as its node reports it (NodeInfo.batch_cost; a tab's page state). */
export interface Stage extends StageCost {
  readonly node: string;
  readonly layers: string;
  readonly kind: "tab" | "node";
  readonly engine: string;
  readonly maxSessions: number;
  readonly cohorts: boolean;
  readonly cohortsBy: string;
}

/** One round of a window: one session on each lane, then `sessions` on each. */
export interface BigRound {
  readonly first: "route" | "whole";
  readonly one: { readonly route: number; readonly whole: number };
  readonly many: { readonly route: number; readonly whole: number };
  /** sessions per engine call each stage of the route saw at `sessions`, in route order */
  readonly batch_by_stage: number[];
  /** the route's pipeline ceiling at those batches, tok/s */
  readonly ceiling_tps: number;
}

export const HOW_MEASURED =
  "each lane its own strata up network, chats through its gateway; decode tok/s on the bench's clock: " +
  "tokens after each session's first over the time from its first token to its last (many sessions: " +
  "over the time any was decoding); the same prompts, tokens and KV cells; the same sessions admitted at " +
  "once on both lanes of a pair; the whole model (one node, every core's thread) stays up beside each " +
  "route and takes turns with it, one session then many each round, the first lane alternating; medians " +
  "of the rounds' figures and ratios";

const strata = new URL("../../strata", import.meta.url).pathname;
async function run(args: string[]): Promise<string> {
  const o = await new Deno.Command(strata, { args, stdout: "piped", stderr: "inherit" }).output();
  if (o.code !== 0) throw new Error(`strata ${args.join(" ")}: exit ${o.code}`);
  return new TextDecoder().decode(o.stdout).trim().split("\n").pop()!;
}

export async function benchBigModel(o: BigBenchOptions) {
  const model = cacheDir("models", `synth-llama-${Math.round(o.sizeBytes / 1e6)}MB-seed1.gguf`);
  const t0 = performance.now();
  try {
    await Deno.stat(model);
  } catch {
    await run([
      "model",
      "synth",
      "--arch",
      "llama",
      "--size",
      String(o.sizeBytes),
      "--seed",
      "1",
      "--out",
      `${model}.part`,
    ]);
    await Deno.rename(`${model}.part`, model);
  }
  const synthS = (performance.now() - t0) / 1000;
  // the publisher's certify, under the cap (beside the model, where the tracker finds it)
  await Deno.remove(referenceBeside(model)).catch(() => {});
  const certified = JSON.parse(
    await run([
      "model",
      "certify",
      model,
      "--memory-cap",
      String(o.capBytes),
      "--out",
      referenceBeside(model),
    ]),
  );
  const { nLayer } = await fileFacts(model);
  const cores = navigator.hardwareConcurrency;
  const name = model.split("/").pop()!;
  const dir = await Deno.makeTempDir({ prefix: "strata-bench-big-" });
  try {
    // first, so that its node times its steps on an idle machine
    say(`whole model: one node 0:${nLayer}, ${cores} threads`);
    const wholeNet = await up({
      ...upBase(model, dir, o),
      threads: cores,
      split: [layerRange(0, nLayer, nLayer)],
    });
    try {
      const whole = { gateway: wholeNet.gateway, stages: await stagesOf(wholeNet, cores) };
      say("mixed route: placed under the cap");
      const mixed = await window(
        { ...upBase(model, dir, o), placed: { capBytes: o.capBytes, tabs: 1, wasm: 1 } },
        whole.gateway,
        name,
        o,
        cores,
      );
      // the same ranges, every one a native node: what the engines cost against the mix
      const ranges = mixed.stages.map((s) => parseLayerRange(s.layers, nLayer));
      say(`all-native route ${ranges.map(formatRange).join(",")}`);
      const native = await window({ ...upBase(model, dir, o), split: ranges }, whole.gateway, name, o, cores);
      return {
        model: name,
        file_bytes: (await Deno.stat(model)).size,
        synth_s: synthS,
        cap_bytes: o.capBytes,
        cores,
        threads: { route_node: o.threads, whole: cores },
        sessions: o.sessions,
        tokens: o.newTokens,
        rounds: o.rounds,
        measured: HOW_MEASURED,
        certify: {
          ranges: certified.ranges,
          s: certified.ms / 1000,
          peak_rss_bytes: certified.peak_rss_bytes,
          base_rss_bytes: certified.base_rss_bytes,
        },
        whole: { stages: whole.stages },
        mixed,
        all_native: native,
      };
    } finally {
      await wholeNet.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** A route's network up, its stages, rounds in turns with the whole model's, medians; then down. */
async function window(
  options: UpOptions,
  wholeGateway: string,
  name: string,
  o: BigBenchOptions,
  cores: number,
) {
  const net = await up(options);
  try {
    // the tracker rebalances a placed network once speeds are measured and the plan is quiet
    // (30 s): nodes reload their new ranges (minutes at 2 GB) and the route is incomplete
    // meanwhile. Measure once every node holds one range a while, all admitted.
    if (options.placed) await settled(net.tracker);
    const stages = await stagesOf(net, o.threads);
    // a lone tab takes 8 sessions at once: the rest wait their turn, on both lanes alike
    const admit = Math.min(o.sessions, ...stages.map((s) => s.maxSessions || o.sessions));
    say(
      `stages: ${stages.map((s) => `${s.node} ${s.layers}`).join(", ")}; ${admit} sessions admitted at once`,
    );
    const lanes = { route: net.gateway, whole: wholeGateway };
    for (const gw of Object.values(lanes)) await timedChat(gw, "Hello", 2, name); // warm-up
    const rounds: BigRound[] = [];
    for (let r = 0; r < o.rounds; r++) {
      const order = r % 2 === 0 ? ["route", "whole"] as const : ["whole", "route"] as const;
      const one = { route: 0, whole: 0 }, many = { route: 0, whole: 0 };
      let routeChats: TimedChat[] = [];
      for (const lane of order) {
        one[lane] = chatDecodeTps((await timedChat(lanes[lane], PARITY_QUESTIONS[0], o.newTokens, name)).at);
      }
      for (const lane of order) {
        const chats = await admitted(
          o.sessions,
          admit,
          (i) => timedChat(lanes[lane], PARITY_QUESTIONS[i % PARITY_QUESTIONS.length], o.newTokens, name),
        );
        many[lane] = decodeTpsTogether(chats);
        if (lane === "route") routeChats = chats;
      }
      const batch = batchByStage(stages, routeChats);
      rounds.push({
        first: order[0],
        one,
        many,
        batch_by_stage: batch,
        ceiling_tps: pipelineCeiling(stages.map((cost, i) => ({ cost, batch: batch[i] })), cores),
      });
      say(
        `round ${r + 1}/${o.rounds}: 1 session ${f(one.route)} / ${
          f(one.whole)
        } tok/s, ${o.sessions} sessions ${f(many.route)} / ${f(many.whole)} tok/s (route / whole)`,
      );
    }
    const med = (g: (x: BigRound) => number) => quantile(rounds.map(g), 0.5);
    return {
      stages,
      admitted: admit,
      rounds,
      one_session_ceiling_tps: oneSessionCeiling(stages),
      median: {
        route_one_tps: med((x) => x.one.route),
        whole_one_tps: med((x) => x.one.whole),
        route_many_tps: med((x) => x.many.route),
        whole_many_tps: med((x) => x.many.whole),
        ceiling_tps: med((x) => x.ceiling_tps),
        one_vs_whole: med((x) => x.one.route / x.one.whole),
        many_vs_whole: med((x) => x.many.route / x.many.whole),
        route_many_vs_one: med((x) => x.many.route / x.one.route),
        whole_many_vs_one: med((x) => x.many.whole / x.one.whole),
        vs_ceiling: med((x) => x.many.route / x.ceiling_tps),
      },
    };
  } catch (e) {
    throw new Error(
      `${e instanceof Error ? e.message : e}; the tracker's nodes: ${await nodesNow(net.tracker)}`,
    );
  } finally {
    await net.stop();
  }
}

/** Sessions per engine call each stage saw over these chats (their telemetry), in stage order. */
function batchByStage(stages: readonly Stage[], chats: readonly TimedChat[]): number[] {
  return stages.map((s) => {
    let steps = 0, sessions = 0;
    for (const c of chats) {
      for (const n of c.nodes) {
        if (n.node !== s.node) continue;
        steps += n.steps;
        sessions += n.batch_sessions;
      }
    }
    return steps > 0 ? sessions / steps : 1;
  });
}

/**
 * Every live, admitted node of a network in route order, with what it timed at load: a node's
 * NodeInfo, a tab's page state (it is reached through the relay only).
 */
async function stagesOf(net: Network, threads: number): Promise<Stage[]> {
  const t = trackerClient(net.tracker);
  const listed = await t.client.nodes({}, { timeoutMs: 5000 }).finally(() => t.close());
  const live = listed.nodes.filter((n) => n.live && n.admission === "admitted" && n.shard?.range)
    .sort((a, b) => a.shard!.range!.start - b.shard!.range!.start);
  const tabs = await Promise.all(net.tabs.map((tab) => tab.state()));
  const seams = new GrpcSeams();
  try {
    return await Promise.all(live.map(async (n): Promise<Stage> => {
      const layers = `${n.shard!.range!.start}:${n.shard!.range!.end}`;
      const tab = tabs.find((s) => s.name === n.node);
      if (tab) {
        const i = tab.info;
        return {
          node: n.node,
          layers,
          kind: "tab",
          engine: tab.engine,
          threads,
          maxSessions: Number(i.maxSessions) || 0,
          oneMs: Number(i.stepMs) || 0,
          batchMs: Number(i.batchStepMs) || 0,
          batchSessions: Number(i.batchSessions) || 0,
          cohorts: Number(i.cohorts) === 1,
          cohortsBy: String(i.cohortsBy ?? ""),
        };
      }
      const url = n.urls.find((u) => /^https?:\/\//.test(u));
      if (!url) throw new Error(`${n.node} has no direct URL to ask for its figures`);
      const info = await seams.info(url);
      const c = info.batchCost;
      return {
        node: n.node,
        layers,
        kind: "node",
        engine: info.engine,
        threads,
        maxSessions: info.maxSessions,
        oneMs: c?.oneMs ?? 0,
        batchMs: c?.batchMs ?? 0,
        batchSessions: c?.batchSessions ?? 0,
        cohorts: c?.cohorts ?? false,
        cohortsBy: c?.cohortsBy ?? "",
      };
    }));
  } finally {
    seams.close();
  }
}

const say = (w: string) => console.error(`  ${w}`);
const f = (x: number, d = 2) => x.toFixed(d);

function upBase(model: string, dir: string, o: BigBenchOptions): UpOptions {
  return {
    model,
    split: [],
    routes: 1,
    backend: "cpu",
    threads: o.threads,
    gatewayListen: "127.0.0.1:0",
    apiKeys: [],
    // six processes and a browser on two cores: a node busy loading its 2 GB range can miss
    // a short lease's heartbeats and leave the route incomplete
    leaseMs: 60_000,
    dbPath: `${dir}/tracker-${crypto.randomUUID()}.db`,
    kvCells: 4096,
    maxSessions: o.sessions,
    // every round's prompts prefilled whole, on every lane: no round starts from the last one's KV
    prefixReuse: false,
    admission: { maxWaiting: 64, timeoutMs: 3_600_000 },
    progress: say,
  };
}

type BigBench = Awaited<ReturnType<typeof benchBigModel>>;
type Window = BigBench["mixed"];

export function printBigBench(r: BigBench): string {
  const mb = (n: number) => `${(n / 1e6).toFixed(0)} MB`;
  return [
    `${r.model}: ${(r.file_bytes / 1e9).toFixed(2)} GB (synth ${
      r.synth_s.toFixed(0)
    } s), every participant capped at ${mb(r.cap_bytes)}; ${r.cores} cores`,
    `certify: ranges ${r.certify.ranges.join(",")} in ${r.certify.s.toFixed(1)} s; peak RSS ${
      mb(r.certify.peak_rss_bytes)
    } (process base ${mb(r.certify.base_rss_bytes)})`,
    `measured: ${r.measured}; ${r.sessions} sessions of ${r.tokens} tokens, ${r.rounds} rounds a route; route nodes ${r.threads.route_node} thread(s) each, the whole model ${r.threads.whole}`,
    `whole model: ${stageLines(r.whole.stages).join("; ")}`,
    ...printWindow("mixed route", r.mixed, r.sessions),
    ...printWindow("all-native route", r.all_native, r.sessions),
    `all-native, ${r.sessions} sessions / whole model, ${r.sessions}: ${
      f(r.all_native.median.many_vs_whole)
    } (target ≥ 0.8); mixed route / its pipeline ceiling: ${f(r.mixed.median.vs_ceiling)} (target ≥ 0.7)`,
  ].join("\n");
}

function stageLines(stages: readonly Stage[]): string[] {
  return stages.map((s) =>
    `${s.node} ${s.layers}${s.kind === "tab" ? " (tab)" : ""} ${s.engine}: a step ${
      f(s.oneMs, 1)
    } ms alone, ${f(s.batchMs, 1)} ms for ${s.batchSessions} (${f(s.batchMs / s.oneMs)}×, ${
      f(stepMsAt(s, s.batchSessions) / s.batchSessions / s.oneMs)
    } a token); cohorts ${s.cohorts ? "on" : "off"} (${s.cohortsBy})`
  );
}

function printWindow(title: string, w: Window, sessions: number): string[] {
  const m = w.median;
  return [
    `${title} ${w.stages.map((s) => s.layers).join(",")}, ${w.admitted} sessions admitted at once:`,
    ...stageLines(w.stages).map((x) => `  ${x}`),
    `  1 session:   route ${f(m.route_one_tps)} tok/s, whole ${f(m.whole_one_tps)} tok/s (${
      f(m.one_vs_whole)
    }×); rounds ${
      w.rounds.map((x) => `${f(x.one.route)}/${f(x.one.whole)}`).join(", ")
    }; the stages' steps alone add up to ${f(w.one_session_ceiling_tps)} tok/s (${
      f(m.route_one_tps / w.one_session_ceiling_tps)
    }×)`,
    `  ${sessions} sessions: route ${f(m.route_many_tps)} tok/s, whole ${f(m.whole_many_tps)} tok/s (${
      f(m.many_vs_whole)
    }×); rounds ${w.rounds.map((x) => `${f(x.many.route)}/${f(x.many.whole)}`).join(", ")}`,
    `  ${sessions} against 1: route ${f(m.route_many_vs_one)}×, whole ${f(m.whole_many_vs_one)}×`,
    `  pipeline ceiling (cores / the stages' core-seconds a token at the batches they ran: ${
      w.rounds.map((x) => x.batch_by_stage.map((b) => f(b, 1)).join("/")).join(", ")
    }): ${f(m.ceiling_tps)} tok/s; route / ceiling ${f(m.vs_ceiling)}`,
  ];
}

/** Each node as the tracker sees it: live, admitted, its range (what a failed run needs). */
async function nodesNow(trackerUrl: string): Promise<string> {
  const t = trackerClient(trackerUrl);
  try {
    const { nodes } = await t.client.nodes({}, { timeoutMs: 5000 });
    return nodes.map((n) =>
      `${n.node} ${n.shard?.range?.start}:${n.shard?.range?.end} ${
        n.live ? "live" : "not live"
      } ${n.admission}`
    ).join("; ");
  } catch (e) {
    return `unreachable (${e instanceof Error ? e.message : e})`;
  } finally {
    t.close();
  }
}

/** Waits until every live node is admitted and no node's range has changed for `quietMs`. */
async function settled(trackerUrl: string, quietMs = 45_000, timeoutMs = 1_800_000): Promise<void> {
  const t = trackerClient(trackerUrl);
  try {
    let last = "";
    let since = Date.now();
    for (const t0 = Date.now(); Date.now() - t0 < timeoutMs; await new Promise((r) => setTimeout(r, 1000))) {
      const { nodes } = await t.client.nodes({}, { timeoutMs: 5000 });
      const live = nodes.filter((n) => n.live);
      const now = live.map((n) => `${n.node}@${n.shard?.range?.start}:${n.shard?.range?.end}/${n.admission}`)
        .sort().join(" ");
      if (now !== last) {
        last = now;
        since = Date.now();
        say(`placement: ${now}`);
      }
      if (live.every((n) => n.admission === "admitted") && Date.now() - since >= quietMs) return;
    }
    throw new Error(`the placement did not settle within ${timeoutMs / 1000} s: ${last}`);
  } finally {
    t.close();
  }
}
