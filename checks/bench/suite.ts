// `strata bench`: one invocation, one machine, the same prompt token ids for every system —
// whole-model llama.cpp from the pin, Strata routes of 2 and 3 shards on loopback, llama.cpp's
// own RPC split of the same layers, the WASM engine, concurrency 1…16 on the 2-shard route,
// and TTFT through the gateway — with every ratio computed pair by pair within the run.
import { evenSplit, formatRange, parseSplit } from "../../src/engine/layer-range.ts";
import type { Tokenizer } from "../../src/engine/tokenizer.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { fileFacts } from "../../server/model/facts.ts";
import { metaNumber } from "../../src/gguf/reader.ts";
import type { EngineFigures } from "./figures.ts";
import { measureWhole } from "./measure-engine.ts";
import { measureRoute } from "./measure-route.ts";
import { measureRpc } from "./measure-rpc.ts";
import { benchUp } from "./up-vs-whole.ts";
import { wholeDecode, wholeDecodeAtOnce } from "./route-throughput.ts";
import { benchSeamCompression } from "./seam-compression.ts";
import { benchTransport } from "./transport.ts";
import { decodeTurns } from "./decode-turns.ts";
import { pinnedLanes } from "./pinned-lanes.ts";
import { gatewayTtft } from "./gateway-ttft.ts";

export interface SuiteOptions {
  readonly model: string;
  readonly modelPath: string;
  readonly tokenizer: Tokenizer;
  readonly split2: string;
  readonly backend: NativeBackend;
  /** engine threads of every engine process (the whole model's, each node's, each rpc-server's) */
  readonly threads: number;
  readonly promptTokens: number;
  readonly decodeTokens: number;
  readonly concurrency: readonly number[];
  readonly progress?: (what: string) => void;
}

/** Rounds of one-session decode on the whole model and the routes in turns (odd: a true median). */
const TURNS = 5;
/** The contract's lanes: rounds of one session (at least 7), of 8 sessions, and decode steps a turn. */
const PINNED_ROUNDS = 9, PINNED_MANY_ROUNDS = 5, PINNED_STEPS = 128;
/** rounds over the chat questions, TTFT through the gateway against the route's own */
const TTFT_ROUNDS = 2;

export async function benchSuite(o: SuiteOptions) {
  const say = o.progress ?? (() => {});
  const facts = await fileFacts(o.modelPath);
  const nEmbd = metaNumber(facts.header, `${facts.arch}.embedding_length`) ?? 0;
  const split2 = parseSplit(o.split2, facts.nLayer);
  const split3 = evenSplit(facts.nLayer, 3);
  const base = {
    modelPath: o.modelPath,
    threads: o.threads,
    promptTokens: o.promptTokens,
    decodeTokens: o.decodeTokens,
  };
  const route = { ...base, nLayer: facts.nLayer, nEmbd, backend: o.backend };
  const started = performance.now();

  // the contract's lanes first, on a quiet machine
  const pinned = await pinnedLanes({
    modelPath: o.modelPath,
    header: facts.header,
    fileSize: (await Deno.stat(o.modelPath)).size,
    nLayer: facts.nLayer,
    nEmbd,
    backend: o.backend,
    split2,
    split3,
    promptTokens: o.promptTokens,
    decodeTokens: PINNED_STEPS,
    rounds: PINNED_ROUNDS,
    manyRounds: PINNED_MANY_ROUNDS,
    progress: say,
  });
  say("pinned: TTFT through the gateway against the route's own");
  const ttft = await gatewayTtft({
    model: o.model,
    modelPath: o.modelPath,
    nLayer: facts.nLayer,
    split: split2,
    backend: o.backend,
    tokenizer: o.tokenizer,
    rounds: TTFT_ROUNDS,
  });

  say("whole-model llama.cpp");
  const whole = await measureWhole({ ...base, backend: o.backend });
  // the engine's own batching gain, the ceiling a route's aggregate builds on
  say("whole-model llama.cpp, 1 and 8 sessions batched");
  const wholeOpts = {
    modelPath: o.modelPath,
    tokens: o.decodeTokens,
    threads: o.threads,
    backend: o.backend,
  };
  const whole1 = await wholeDecode(wholeOpts, 1);
  const whole8 = await wholeDecode(wholeOpts, 8);
  // the 2-shard route's aggregate runs on 2 engine processes: the whole model gets their threads
  say("whole-model llama.cpp, 8 sessions batched, the route's threads together");
  const whole8Same = await wholeDecode({ ...wholeOpts, threads: 2 * o.threads }, 8);
  // 8 sessions on the route of 2 run as two cohorts of 4, one on each node at a time: each cohort
  // costs the whole model's work for 4 once (half on each node), the two nodes at once. Two
  // whole-model processes at 4 sessions each, at the same time, do that work with no seams.
  say("whole-model llama.cpp, two processes at 4 sessions each at once (the route's ceiling at 8)");
  const ceiling = await wholeDecodeAtOnce(wholeOpts, 4, 2);
  const whole4 = await wholeDecode(wholeOpts, 4);
  say(`route of 2 (${o.split2}) and concurrency ${o.concurrency.join(", ")}`);
  const route2 = await measureRoute({ ...route, split: split2, concurrency: o.concurrency, lockstep: [8] });
  say(`route of 3 (${split3.map(formatRange).join(",")})`);
  const route3 = await measureRoute({ ...route, split: split3, concurrency: [] });
  say(`one session on the whole model and both routes, in turns (${TURNS} rounds)`);
  const turns = await decodeTurns({ ...route, splits: [split2, split3], rounds: TURNS });
  say("llama.cpp RPC, the same 2-way split");
  const rpc2 = await measureRpc({ ...base, split: split2 });
  say("WASM engine (CPU), whole model");
  const wasm = await measureWhole({ ...base, backend: "wasm" });
  say("q8 seam compression against f32 (2 and 3 shards)");
  const q8 = [];
  for (const kind of ["block32", "row"] as const) {
    for (const split of [split2, split3]) {
      q8.push(
        await benchSeamCompression({
          modelPath: o.modelPath,
          tokenizer: o.tokenizer,
          split,
          prompts: 4,
          steps: 32,
          kind,
        }),
      );
    }
  }
  say("seam transports alone, in plaintext and over TLS");
  const transport = await benchTransport(nEmbd);
  say("TTFT through strata up's gateway");
  const gw = await benchUp({
    model: o.model,
    modelPath: o.modelPath,
    split: split2,
    backend: o.backend,
    threads: o.threads,
    newTokens: 16,
    // a median of 8 chats: with 4, one run's TTFT ratio moved by ±10% on noise alone
    prompts: 8,
    tokenizer: o.tokenizer,
    // the same threads as every other engine process in this run
    wholeThreads: o.threads,
  });

  const pick = (f: EngineFigures) => ({
    ttft_ms: f.ttft_ms,
    prefill_tps: f.prefill_tps,
    decode_tps: f.decode_tps,
    p50_ms: f.p50_ms,
    p95_ms: f.p95_ms,
    rss_mb: f.rss_mb,
  });
  const agg = (n: number) => route2.concurrency.find((c) => c.sessions === n)?.aggregate_tps;
  // 8 sessions with cohorts and without, in turns: the medians of each side
  const lockstep8 = route2.concurrency_lockstep.find((c) => c.sessions === 8);
  const gatewayBudget = 1.1 * gw.whole.ttft_ms_p50 + 5;
  return {
    model: o.model,
    machine: {
      cores: navigator.hardwareConcurrency,
      threads_per_engine_process: o.threads,
      backend: o.backend,
    },
    prompt_tokens: o.promptTokens,
    decode_tokens: o.decodeTokens,
    whole: { ...pick(whole), engine: whole.engine },
    route2: {
      ...pick(route2),
      open_ms: route2.open_ms,
      split: o.split2,
      nodes: route2.nodes,
      profile: route2.profile,
    },
    route3: {
      ...pick(route3),
      split: split3.map(formatRange).join(","),
      nodes: route3.nodes,
      profile: route3.profile,
    },
    turns,
    rpc2: { ...pick(rpc2), split: o.split2, model_mib_per_server: rpc2.model_mib_per_server },
    wasm: { ...pick(wasm), engine: wasm.engine },
    concurrency: route2.concurrency,
    concurrency_lockstep: route2.concurrency_lockstep,
    whole_batched: {
      sessions_1_tps: whole1,
      sessions_8_tps: whole8,
      gain_8_vs_1: whole8 / whole1,
      sessions_8_tps_route_threads: whole8Same,
      threads_route: 2 * o.threads,
      sessions_4_tps: whole4,
      /** two whole-model processes at 4 sessions each, at once: each one's rate */
      two_processes_4_tps: ceiling,
      /** 8 sessions on a route of 2 with nothing lost to seams, idling or imbalance: their sum */
      route2_ceiling_8_tps: ceiling[0] + ceiling[1],
    },
    seam_bytes_per_token: route2.seam_bytes_per_token,
    transport,
    seam_compression_q8: q8,
    pinned,
    gateway: {
      ...ttft,
      unpinned: {
        ttft_ms_p50: gw.strata_up.ttft_ms_p50,
        whole_prefill_ms_p50: gw.whole.ttft_ms_p50,
        whole_budget_ms: gatewayBudget,
        whole_model_threads: gw.whole_model_threads,
      },
    },
    ratios: {
      // the rounds in turns: drift between lanes measured minutes apart stays out of them
      route2_vs_whole_decode: turns.ratios[0],
      route3_vs_whole_decode: turns.ratios[1],
      route2_vs_whole_decode_one_pass: route2.decode_tps / whole.decode_tps,
      route3_vs_whole_decode_one_pass: route3.decode_tps / whole.decode_tps,
      route2_vs_rpc2_decode: route2.decode_tps / rpc2.decode_tps,
      rpc2_vs_whole_decode: rpc2.decode_tps / whole.decode_tps,
      wasm_vs_whole_decode: wasm.decode_tps / whole.decode_tps,
      agg8_vs_1: (agg(8) ?? NaN) / (agg(1) ?? NaN),
      agg8_route2_vs_whole8_same_threads: (agg(8) ?? NaN) / whole8Same,
      agg8_ceiling_vs_whole8_same_threads: (ceiling[0] + ceiling[1]) / whole8Same,
      agg8_route2_vs_ceiling: (agg(8) ?? NaN) / (ceiling[0] + ceiling[1]),
      agg8_cohorts_vs_lockstep: lockstep8 ? lockstep8.cohorts_tps / lockstep8.aggregate_tps : NaN,
      gateway_ttft_vs_whole_budget: gw.strata_up.ttft_ms_p50 / gatewayBudget,
    },
    seconds: (performance.now() - started) / 1000,
  };
}

export type SuiteReport = Awaited<ReturnType<typeof benchSuite>>;
