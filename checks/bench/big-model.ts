// A model bigger than any participant, measured: a synthetic llama of `size` (6 GB by
// default), certified under the cap, served by `strata up --memory-cap` with a headless tab,
// a Deno WASM node and native nodes; decode tok/s of one session and the aggregate of
// `sessions` at once, beside whole-model llama.cpp holding the whole file in one process on
// the same machine. Prints figures; asserts nothing.
import { referenceBeside } from "../../server/model/reference-file.ts";
import { cacheDir } from "../../server/process/paths.ts";
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { up } from "../../server/up/up.ts";
import type { UpOptions } from "../../server/up/plane.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { EngineProcess } from "../engine-host/engine-process.ts";
import { prefilled, stepTogether } from "./route-throughput.ts";
import { PARITY_QUESTIONS } from "../parity/prompts.ts";
import { timedChat } from "./timed-chat.ts";
import { formatRange, parseLayerRange } from "../../src/engine/layer-range.ts";

export interface BigBenchOptions {
  readonly sizeBytes: number;
  readonly capBytes: number;
  readonly sessions: number;
  readonly newTokens: number;
  readonly threads: number;
}

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
  const tok = await NativeTokenizer.load(model);
  const prompts = Array.from(
    { length: o.sessions },
    (_, i) =>
      tok.tokenize(
        tok.applyChat([{ role: "user", content: PARITY_QUESTIONS[i % PARITY_QUESTIONS.length] }]),
        {
          addSpecial: true,
          parseSpecial: true,
        },
      ),
  );
  tok.close();
  const whole = await wholeModel(model, prompts, o);

  const name = model.split("/").pop()!;
  const dir = await Deno.makeTempDir({ prefix: "strata-bench-big-" });
  try {
    const mixed = await served(
      { ...upBase(model, dir, o), placed: { capBytes: o.capBytes, tabs: 1, wasm: 1 } },
      name,
      o,
    );
    // the same ranges, every one a native node: what the engines cost against the mix
    const ranges = mixed.ranges.map((r) => parseLayerRange(r)).sort((a, b) => a.start - b.start);
    say(`all-native route ${ranges.map(formatRange).join(",")}`);
    const native = await served({ ...upBase(model, dir, o), split: ranges }, name, o);
    return {
      model: name,
      file_bytes: (await Deno.stat(model)).size,
      synth_s: synthS,
      cap_bytes: o.capBytes,
      certify: {
        ranges: certified.ranges,
        s: certified.ms / 1000,
        peak_rss_bytes: certified.peak_rss_bytes,
        base_rss_bytes: certified.base_rss_bytes,
      },
      members: mixed.members,
      route: mixed.rates,
      all_native: { ranges: ranges.map(formatRange), ...native.rates },
      whole,
    };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** A network up, its members and ranges, one session's rate and the aggregate of many; then down. */
async function served(options: UpOptions, name: string, o: BigBenchOptions) {
  const net = await up(options);
  try {
    // the tracker rebalances a placed network once speeds are measured and the plan is quiet
    // (30 s): nodes reload their new ranges (minutes at 2 GB) and the route is incomplete
    // meanwhile. Measure once every node holds one range a while, all admitted.
    if (options.placed) await settled(net.tracker);
    const tabs = await Promise.all(net.tabs.map((t) => t.state()));
    const tabRanges = tabs.map((s) => `${s.assignment?.range.start}:${s.assignment?.range.end}`);
    return {
      members: [
        ...tabs.map((s, i) => `${s.name} ${tabRanges[i]} (tab)`),
        ...net.nodes.map((n) => `${n.name} ${n.layers}`),
      ],
      ranges: [...tabRanges, ...net.nodes.map((n) => n.layers)],
      rates: await oneAndMany(net.gateway, name, o).catch(async (e) => {
        throw new Error(
          `${e instanceof Error ? e.message : e}; the tracker's nodes: ${await nodesNow(net.tracker)}`,
        );
      }),
    };
  } finally {
    await net.stop();
  }
}

const say = (w: string) => console.error(`  ${w}`);

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
    // a tab takes 8 sessions at once: the rest wait their turn in the gateway's queue
    admission: { maxWaiting: 64, timeoutMs: 3_600_000 },
    progress: say,
  };
}

/** One session's decode tok/s, then the aggregate of `o.sessions` at once through the gateway. */
async function oneAndMany(gateway: string, name: string, o: BigBenchOptions) {
  await timedChat(gateway, "Hello", 2, name); // warm-up
  const one = await timedChat(gateway, PARITY_QUESTIONS[0], o.newTokens, name);
  const oneTokS = (one.at.length - 1) / ((one.at.at(-1)! - one.at[0]) / 1000);
  // all sessions at once: tokens over the time from the first to the last token anywhere
  const many = await Promise.all(
    Array.from(
      { length: o.sessions },
      (_, i) => timedChat(gateway, PARITY_QUESTIONS[i % PARITY_QUESTIONS.length], o.newTokens, name),
    ),
  );
  const first = Math.min(...many.map((c) => c.at[0]));
  const last = Math.max(...many.map((c) => c.at.at(-1)!));
  const tokens = many.reduce((n, c) => n + c.at.length, 0);
  return {
    one_session_tok_s: oneTokS,
    aggregate_tok_s: tokens / ((last - first) / 1000),
    sessions: o.sessions,
  };
}

/** Whole-model llama.cpp in one process: one session, then all of them batched step by step. */
async function wholeModel(modelPath: string, prompts: Int32Array[], o: BigBenchOptions) {
  const p = await EngineProcess.spawn({
    modelPath,
    range: "whole",
    kvCells: 4096,
    maxSequences: prompts.length,
    batchTokens: 512,
    threads: navigator.hardwareConcurrency,
    backend: "cpu",
  });
  try {
    // prefill each, then decode all together, by the shard process's own step times
    const decodeRun = async (ps: Int32Array[]) => {
      const ready = await prefilled(p, ps);
      const rate = await stepTogether(ready, o.newTokens - 1);
      for (const seq of ready.seqs) await p.release(seq);
      return rate;
    };
    const one = await decodeRun(prompts.slice(0, 1));
    const all = await decodeRun(prompts);
    return { one_session_tok_s: one, aggregate_tok_s: all, sessions: prompts.length };
  } finally {
    await p.close();
  }
}

export function printBigBench(r: Awaited<ReturnType<typeof benchBigModel>>): string {
  const mb = (n: number) => `${(n / 1e6).toFixed(0)} MB`;
  return [
    `${r.model}: ${(r.file_bytes / 1e9).toFixed(2)} GB (synth ${
      r.synth_s.toFixed(0)
    } s), every participant capped at ${mb(r.cap_bytes)}`,
    `certify: ranges ${r.certify.ranges.join(",")} in ${r.certify.s.toFixed(1)} s; peak RSS ${
      mb(r.certify.peak_rss_bytes)
    } (process base ${mb(r.certify.base_rss_bytes)})`,
    `placed: ${r.members.join(", ")}`,
    `decode, 1 session:  route ${r.route.one_session_tok_s.toFixed(2)} tok/s, whole model ${
      r.whole.one_session_tok_s.toFixed(2)
    } tok/s (${(r.route.one_session_tok_s / r.whole.one_session_tok_s).toFixed(2)}×)`,
    `decode, ${r.route.sessions} sessions: route ${r.route.aggregate_tok_s.toFixed(2)} tok/s, whole model ${
      r.whole.aggregate_tok_s.toFixed(2)
    } tok/s (${(r.route.aggregate_tok_s / r.whole.aggregate_tok_s).toFixed(2)}×); ${
      (r.route.aggregate_tok_s / r.route.one_session_tok_s).toFixed(2)
    }× its one session`,
    `all-native route ${r.all_native.ranges.join(",")}: 1 session ${
      r.all_native.one_session_tok_s.toFixed(2)
    } tok/s, ${r.all_native.sessions} sessions ${r.all_native.aggregate_tok_s.toFixed(2)} tok/s (${
      (r.all_native.aggregate_tok_s / r.whole.aggregate_tok_s).toFixed(2)
    }× whole, ${
      (r.all_native.aggregate_tok_s / r.all_native.one_session_tok_s).toFixed(2)
    }× its one session)`,
    `whole model: ${r.whole.sessions} sessions ${
      (r.whole.aggregate_tok_s / r.whole.one_session_tok_s).toFixed(2)
    }× one`,
  ].join("\n");
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
