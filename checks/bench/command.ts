// `strata bench` (the whole suite, the default), `strata bench hosts` and `strata bench parity`:
// the CLI side of suite.ts, hosts.ts, the parity sweep, the report and the contract check.
import { Command, Option } from "commander";
import { join } from "node:path";
import { evenSplit, parseSplit } from "../../src/engine/layer-range.ts";
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { ensureNativeLibrary } from "../../server/build/native.ts";
import { ensureWasmEngine } from "../../server/build/wasm.ts";
import { canMakeHosts } from "../hosts/netns.ts";
import { DEFAULT_MODEL } from "../../server/model/default-model.ts";
import { fileFacts } from "../../server/model/facts.ts";
import { resolveModel } from "../../server/model/fetch.ts";
import { backendOption, int, nativeBackend } from "../../server/cli/options.ts";
import { checkContract, formatChecks, loadContract } from "./contract.ts";
import { benchHosts, type HostsReport } from "./hosts.ts";
import { concurrencyPlot, decodePlot, markdownReport } from "./report.ts";
import { benchSuite, type SuiteReport } from "./suite.ts";
import { pinnedLanes } from "./pinned-lanes.ts";
import { metaNumber } from "../../src/gguf/reader.ts";
import { benchSeamCompression } from "./seam-compression.ts";
import { benchTransport } from "./transport.ts";
import { benchGatewayLoad, printGatewayLoad } from "./gateway-load.ts";
import { benchConstrained, printConstrained } from "./constrained.ts";
import { benchInvarianceCost, summarizeCost } from "./invariance-cost.ts";
import { benchKvPool, printKvPool } from "./kv-pool.ts";
import { benchPrefixReuse, printPrefixReuse } from "./prefix-reuse.ts";
import { benchSnapshotRepair, printSnapshotRepair } from "./snapshot-repair.ts";
import { benchLongContext } from "./long-context.ts";
import {
  paritySweep,
  printSweepResult,
  SWEEP_DEFAULTS,
  type SweepReport,
  sweepSummary,
} from "../parity/sweep.ts";
import { sweepCases } from "../parity/sweep-cases.ts";

const list = (v: string) => v.split(",").map(Number);
const DELAYS = [0, 5, 20, 50];
/** the RPC lane's prompt across hosts (its decode is what is compared) */
const HOSTS_RPC_PROMPT = 64;

async function hostsOrWhy(model: string, split: string, threads: number, tokens: number) {
  const why = await canMakeHosts();
  if (why) {
    console.error(`bench: separate hosts skipped: ${why}`);
    return undefined;
  }
  const { path } = await resolveModel(model);
  const facts = await fileFacts(path);
  return await benchHosts({
    model,
    split: parseSplit(split, facts.nLayer),
    threads,
    delays: DELAYS,
    newTokens: tokens,
    rpc: { modelPath: path, promptTokens: HOSTS_RPC_PROMPT },
  });
}

export function suiteCommand(): Command {
  return new Command("all")
    .description(
      "the performance suite: whole model, routes of 2 and 3, llama.cpp RPC, WASM, concurrency, gateway TTFT, separate hosts; then the parity sweep (exit 1 when a case fails)",
    )
    .option("--split <ranges>", "the 2-shard split (the 3-shard route is even)", DEFAULT_MODEL.split)
    .addOption(backendOption())
    .option("--threads <n>", "engine threads in every engine process", int("threads"), 1)
    .option("--prompt <n>", "prompt tokens", int("prompt"), 64)
    .option("--tokens <n>", "decode steps", int("tokens"), 32)
    .option("--concurrency <list>", "sessions at once on the 2-shard route", "1,2,4,8,16")
    .option("--no-hosts", "skip the separate-host runs (network namespaces, root only)")
    .option("--no-parity", "skip the parity sweep (strata bench parity)")
    .option("--out <dir>", "write bench.json, report.md and the plots here", "bench-results")
    .option("--from <dir>", "report and check an earlier run's bench.json instead of running")
    .option("--json", "print the JSON object")
    .option("--check", "compare with checks/bench/contract.json; exit 1 when a check fails")
    .action(async (o) => {
      let run: SuiteReport & { hosts?: HostsReport; parity?: SweepReport };
      if (o.from) {
        run = JSON.parse(await Deno.readTextFile(join(o.from, "bench.json")));
      } else {
        const { path, name } = await resolveModel(DEFAULT_MODEL.name);
        await ensureNativeLibrary(nativeBackend(o.backend));
        await ensureWasmEngine("cpu");
        const tokenizer = await NativeTokenizer.load(path);
        try {
          const suite = await benchSuite({
            model: name,
            modelPath: path,
            tokenizer,
            split2: o.split,
            backend: nativeBackend(o.backend),
            threads: o.threads,
            promptTokens: o.prompt,
            decodeTokens: o.tokens,
            concurrency: list(o.concurrency),
            progress: (what) => console.error(`bench: ${what}`),
          });
          console.error("bench: separate hosts");
          const hosts = o.hosts ? await hostsOrWhy(name, o.split, o.threads, o.tokens) : undefined;
          // last, after every timed lane: correctness, at the threads the suite's parity file used
          const parity = o.parity
            ? await paritySweep({
              backend: nativeBackend(o.backend),
              ...SWEEP_DEFAULTS,
              progress: (what) => console.error(`bench: ${what}`),
              onCase: (r) => console.error(`bench: ${printSweepResult(r)}`),
            })
            : undefined;
          run = { ...suite, hosts, parity };
        } finally {
          tokenizer.close();
        }
      }
      const checks = checkContract(run, await loadContract());
      Deno.mkdirSync(o.out, { recursive: true });
      await Deno.writeTextFile(join(o.out, "bench.json"), JSON.stringify(run, null, 2));
      await Deno.writeTextFile(join(o.out, "concurrency.svg"), await concurrencyPlot(run));
      await Deno.writeTextFile(join(o.out, "decode.svg"), await decodePlot(run));
      const md = markdownReport(run, run.hosts, checks, run.parity);
      await Deno.writeTextFile(join(o.out, "report.md"), md);
      console.log(o.json ? JSON.stringify(run, null, 2) : md);
      console.error(`bench: wrote ${o.out}/bench.json, report.md, concurrency.svg, decode.svg`);
      if (o.check) {
        console.error(formatChecks(checks));
        if (checks.some((c) => !c.pass)) Deno.exitCode = 1;
      }
      // a correctness sweep: a failing case fails the run, as strata parity does
      if (run.parity) {
        console.error(`bench: ${sweepSummary(run.parity)}`);
        if (!run.parity.ok) Deno.exitCode = 1;
      }
    });
}

/** `strata bench parity`: the parity sweep the suite's parity file keeps one case of per architecture. */
export function parityBenchCommand(): Command {
  return new Command("parity")
    .description(
      "the parity sweep: strata parity on both catalog models and a synthetic model of every architecture, " +
        "each split in 2 and 3 shards, and the splits an architecture refuses; each case's figures and verdict " +
        "(exit 1 when a case fails)",
    )
    .addOption(backendOption())
    .option("--tokens <n>", "greedy decode steps per session", int("tokens"), SWEEP_DEFAULTS.tokens)
    .option("--sessions <n>", "sessions, alone and batched", int("sessions"), SWEEP_DEFAULTS.sessions)
    .option("--threads <n>", "engine threads per process", int("threads"), SWEEP_DEFAULTS.threads)
    .option("--only <model...>", "only these models' cases (catalog names or synthetic architectures)")
    .option("--json", "print one JSON object")
    .action(async (o) => {
      sweepCases(o.only); // an unknown name is refused before anything builds
      const backend = nativeBackend(o.backend);
      await ensureNativeLibrary(backend);
      const r = await paritySweep({
        backend,
        tokens: o.tokens,
        sessions: o.sessions,
        threads: o.threads,
        only: o.only,
        progress: (what) => console.error(`bench: ${what}`),
        // the verdicts as they come: on stdout, or beside the JSON on stderr
        onCase: (c) =>
          o.json ? console.error(`bench: ${printSweepResult(c)}`) : console.log(printSweepResult(c)),
      });
      console.log(o.json ? JSON.stringify(r, null, 2) : sweepSummary(r));
      if (!r.ok) Deno.exitCode = 1;
    });
}

export function seamCompressionCommand(): Command {
  return new Command("q8")
    .description("q8 row transport on seams against f32: error at each seam, logits and greedy tokens")
    .option("--split <ranges>", "layer ranges", DEFAULT_MODEL.split)
    .option("--prompts <n>", "chat prompts", int("prompts"), 4)
    .option("--steps <n>", "greedy steps a prompt", int("steps"), 32)
    .addOption(
      new Option("--kind <kind>", "one scale per block of 32 or per row").choices(["block32", "row"]).default(
        "block32",
      ),
    )
    .action(async (o) => {
      const { path } = await resolveModel(DEFAULT_MODEL.name);
      await ensureNativeLibrary("cpu");
      const facts = await fileFacts(path);
      const tokenizer = await NativeTokenizer.load(path);
      try {
        const r = await benchSeamCompression({
          modelPath: path,
          tokenizer,
          split: parseSplit(o.split, facts.nLayer),
          prompts: o.prompts,
          steps: o.steps,
          kind: o.kind,
        });
        console.log(JSON.stringify(r, null, 2));
      } finally {
        tokenizer.close();
      }
    });
}

export function transportBenchCommand(): Command {
  return new Command("transport")
    .description(
      "round trips of a seam frame by transport alone: the Strata seams (HTTP/2, fast; plaintext and TLS), a WebSocket, plain TCP",
    )
    .action(async () => {
      console.log(JSON.stringify(await benchTransport(), null, 2));
    });
}

/** `strata bench pinned`: the contract's pinned lanes alone, and the checks on them. */
export function pinnedBenchCommand(): Command {
  return new Command("pinned")
    .description("the contract's lanes alone (each engine process on one core, in turns) and their checks")
    .option("--split <ranges>", "the 2-shard split (the 3-shard route is even)", DEFAULT_MODEL.split)
    .option("--rounds <n>", "rounds of one session a lane", int("rounds"), 9)
    .option("--many-rounds <n>", "rounds of 8 sessions against C2", int("many-rounds"), 5)
    .option("--tokens <n>", "decode steps a turn", int("tokens"), 128)
    .option("--prompt <n>", "prompt tokens", int("prompt"), 64)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const { path } = await resolveModel(DEFAULT_MODEL.name);
      await ensureNativeLibrary("cpu");
      const facts = await fileFacts(path);
      const pinned = await pinnedLanes({
        modelPath: path,
        header: facts.header,
        fileSize: (await Deno.stat(path)).size,
        nLayer: facts.nLayer,
        nEmbd: metaNumber(facts.header, `${facts.arch}.embedding_length`) ?? 0,
        backend: "cpu",
        split2: parseSplit(o.split, facts.nLayer),
        split3: evenSplit(facts.nLayer, 3),
        promptTokens: o.prompt,
        decodeTokens: o.tokens,
        rounds: o.rounds,
        manyRounds: o.manyRounds,
        progress: (what) => console.error(`bench: ${what}`),
      });
      if (o.json) console.log(JSON.stringify(pinned, null, 2));
      const checks = checkContract(
        { pinned },
        (await loadContract()).filter((c) => c.metric.startsWith("pinned.")),
      );
      console.error(formatChecks(checks));
    });
}

export function hostsBenchCommand(): Command {
  return new Command("hosts")
    .description(
      `decode tok/s across network namespaces against one-way link delay (${DELAYS.join(", ")} ms)`,
    )
    .option("--split <ranges>", "layer ranges of the route", DEFAULT_MODEL.split)
    .option("--nodes <n>", "cut the model into n even ranges instead", int("nodes"))
    .option("--threads <n>", "engine threads a node", int("threads"), 1)
    .option("--tokens <n>", "tokens a chat", int("tokens"), 32)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const { path } = await resolveModel(DEFAULT_MODEL.name);
      await ensureNativeLibrary("cpu");
      const facts = await fileFacts(path);
      const split = o.nodes
        ? evenSplit(facts.nLayer, o.nodes).map((r) => `${r.start}:${r.end}`).join(",")
        : o.split;
      const r = await hostsOrWhy(DEFAULT_MODEL.name, split, o.threads, o.tokens);
      if (!r) {
        Deno.exitCode = 1;
        return;
      }
      if (o.json) console.log(JSON.stringify(r, null, 2));
      else {
        for (const x of r.runs) {
          console.log(
            `delay ${String(x.delay_ms).padStart(2)} ms: ${x.decode_tps.toFixed(1)} tok/s, engine ${
              x.engine_ms_per_token.toFixed(1)
            } ms a token, budget ${x.budget_tps.toFixed(1)} tok/s (${x.vs_budget.toFixed(2)}×)` +
              (x.rpc_decode_tps === undefined
                ? ""
                : `; llama.cpp RPC ${x.rpc_decode_tps.toFixed(1)} tok/s (route ${
                  x.route_vs_rpc!.toFixed(2)
                }×)`),
          );
        }
      }
    });
}

/** `strata bench load`: concurrency through the gateway, batch-invariant nodes and not. */
export function loadBenchCommand(): Command {
  return new Command("load")
    .description(
      "N streamed chats at once through strata up (batch-invariant nodes and not): aggregate tok/s, ITL and TTFT p50/p95, chunked-prefill latency",
    )
    .option("--levels <list>", "requests at once", "1,8,16,64")
    .option("--max-tokens <n>", "new tokens per request", int("max-tokens"), 32)
    .option("--routes <n>", "routes of strata up", int("routes"), 2)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      await resolveModel(DEFAULT_MODEL.name);
      await ensureNativeLibrary("cpu");
      const runs = await benchGatewayLoad({
        levels: list(o.levels),
        newTokens: o.maxTokens,
        routes: o.routes,
        progress: (s) => console.error(`bench: ${s}`),
      });
      console.log(o.json ? JSON.stringify(runs, null, 2) : printGatewayLoad(runs));
    });
}

/** `strata bench constrained`: what structured output and tools cost through the gateway. */
export function constrainedBenchCommand(): Command {
  return new Command("constrained")
    .description(
      "plain chat against response_format json_schema and tools (grammars at the node) through strata up: decode tok/s and the last node's ms a step",
    )
    .option("--levels <list>", "requests at once", "1,8")
    .option("--max-tokens <n>", "new tokens per request", int("max-tokens"), 96)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      await resolveModel(DEFAULT_MODEL.name);
      await ensureNativeLibrary("cpu");
      const levels = await benchConstrained({
        levels: list(o.levels),
        maxTokens: o.maxTokens,
        progress: (s) => console.error(`bench: ${s}`),
      });
      console.log(o.json ? JSON.stringify(levels, null, 2) : printConstrained(levels));
    });
}

/** `strata bench invariance`: what batch-invariant decoding costs the engine. */
export function invarianceBenchCommand(): Command {
  return new Command("invariance")
    .description("prefill and decode (1 and 8 sessions) of the whole model with batch invariance on and off")
    .option("--threads <n>", "engine threads", int("threads"), 1)
    .option("--rounds <n>", "on/off pairs (the median is reported)", int("rounds"), 3)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const { path } = await resolveModel(DEFAULT_MODEL.name);
      await ensureNativeLibrary("cpu");
      const runs = await benchInvarianceCost(path, o.threads, o.rounds);
      const summary = summarizeCost(runs);
      if (o.json) return console.log(JSON.stringify({ runs, summary }, null, 2));
      for (const [k, v] of Object.entries(summary)) {
        console.log(`${k.padEnd(16)} on ${v.on.toFixed(1)}, off ${v.off.toFixed(1)}: ${v.ratio.toFixed(3)}×`);
      }
    });
}

/** `strata bench kv-pool`: the slot table, graph passes under churn, prefill on and off. */
export function kvPoolBenchCommand(): Command {
  return new Command("kv-pool")
    .description(
      "one KV pool per node: decode steps on in-order, scattered and reversed slots, graph passes under churn, " +
        "prefill and TTFT, with batch invariance on and off in turns",
    )
    .option("--model <name|path>", "a catalog model or a GGUF file (e.g. from strata model synth --size 1G)")
    .option("--threads <n>", "engine threads", int("threads"), 1)
    .option("--rounds <n>", "on/off pairs (the median is reported)", int("rounds"), 3)
    .option("--steps <n>", "decode steps timed for each slot pattern", int("steps"), 24)
    .option("--prompts <list>", "prompt lengths for prefill and TTFT", "256,2000")
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const { path } = await resolveModel(o.model ?? DEFAULT_MODEL.name);
      await ensureNativeLibrary("cpu");
      const r = await benchKvPool({
        modelPath: path,
        threads: o.threads,
        rounds: o.rounds,
        steps: o.steps,
        prompts: String(o.prompts).split(",").map(Number),
        batchTokens: 512,
      }, (s) => console.error(`bench: ${s}`));
      console.log(o.json ? JSON.stringify(r, null, 2) : printKvPool(r));
    });
}

/** `strata bench prefix`: conversations with prefix reuse and without, through one route. */
export function prefixBenchCommand(): Command {
  return new Command("prefix")
    .description(
      "prefix reuse through strata up, beside a gateway that prefills whole: a long conversation's TTFT per " +
        "turn, and many users at once (hit rate, TTFT p50/p95, node memory against the budget)",
    )
    .option(
      "--system-words <n>",
      "words of the shared system prompt (~1.3 tokens each)",
      int("system-words"),
      1150,
    )
    .option("--turns <n>", "turns of the one conversation", int("turns"), 10)
    .option("--users <n>", "users at once", int("users"), 16)
    .option("--user-turns <n>", "turns of each user's conversation", int("user-turns"), 5)
    .option("--max-tokens <n>", "tokens per answer at most", int("max-tokens"), 32)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      await ensureNativeLibrary("cpu");
      const r = await benchPrefixReuse({
        systemWords: o.systemWords,
        turns: o.turns,
        users: o.users,
        userTurns: o.userTurns,
        maxTokens: o.maxTokens,
      }, (s) => console.error(`bench: ${s}`));
      console.log(o.json ? JSON.stringify(r, null, 2) : printPrefixReuse(r));
    });
}

/** `strata bench snapshot-repair`: a lost hop rebuilt from a KV snapshot, against a replay. */
export function snapshotRepairBenchCommand(): Command {
  return new Command("snapshot-repair")
    .description(
      "strata up with two routes, with KV mirroring and without: a streamed chat behind a long prompt loses a " +
        "node; the time from the failure to the next token, and the positions x layers computed again",
    )
    .option("--prompt-tokens <n>", "prompt tokens, about", int("prompt-tokens"), 2000)
    .option("--max-tokens <n>", "tokens of the answer at most", int("max-tokens"), 96)
    .option("--model <path>", "a GGUF file (default: the 1 GB synthetic llama, made once)")
    .option("--json", "print one JSON object")
    .action(async (o) => {
      await ensureNativeLibrary("cpu");
      const r = await benchSnapshotRepair(
        { promptTokens: o.promptTokens, maxTokens: o.maxTokens, model: o.model },
        (s) => console.error(`bench: ${s}`),
      );
      console.log(o.json ? JSON.stringify(r, null, 2) : printSnapshotRepair(r));
    });
}

/** `strata bench long-context`: long prompts through `strata up` with its defaults. */
export function longContextBenchCommand(): Command {
  return new Command("long-context")
    .description(
      "strata up with its defaults, the openai client: one long chat against whole-model llama.cpp, then many " +
        "long streamed chats at once, each against itself alone; every node empty afterwards",
    )
    .option("--long <n>", "prompt tokens of the one long chat", int("long"), 6000)
    .option("--concurrent <n>", "chats at once", int("concurrent"), 16)
    .option("--concurrent-tokens <n>", "prompt tokens of each of them", int("concurrent-tokens"), 3000)
    .option("--max-tokens <n>", "new tokens of each chat", int("max-tokens"), 32)
    .action(async (o) => {
      const { path, name } = await resolveModel(DEFAULT_MODEL.name);
      await ensureNativeLibrary("cpu");
      const r = await benchLongContext({
        modelPath: path,
        modelName: name,
        longTokens: o.long,
        concurrent: o.concurrent,
        concurrentTokens: o.concurrentTokens,
        maxTokens: o.maxTokens,
        progress: (s) => console.error(`bench: ${s}`),
      });
      console.log(JSON.stringify(r, null, 2));
    });
}
