// The commands that check Strata rather than run it: parity against whole-model llama.cpp,
// the benchmark suite and the separate-host helper. server/cli.ts loads this file when the
// tree has it.
import { type Command, Option } from "commander";
import { Compression } from "../src/gen/strata/seam/v1/seam_pb.ts";
import { parseSplit } from "../src/engine/layer-range.ts";
import { ensureNativeLibrary } from "../server/build/native.ts";
import { NATIVE_BACKENDS } from "../src/engine/backends.ts";
import { NativeTokenizer } from "../server/engine/native/native-tokenizer.ts";
import { resolveModel } from "../server/model/fetch.ts";
import { catalogModel, DEFAULT_MODEL } from "../server/model/default-model.ts";
import { fileFacts } from "../server/model/facts.ts";
import { backendOption, int, memorySize, nativeBackend, num } from "../server/cli/options.ts";
import {
  constrainedBenchCommand,
  hostsBenchCommand,
  invarianceBenchCommand,
  kvPoolBenchCommand,
  loadBenchCommand,
  longContextBenchCommand,
  parityBenchCommand,
  pinnedBenchCommand,
  prefixBenchCommand,
  seamCompressionCommand,
  snapshotRepairBenchCommand,
  suiteCommand,
  transportBenchCommand,
} from "./bench/command.ts";
import { benchShardMemory } from "./bench/shard-memory.ts";
import { gateACommand, verifyCommand } from "./gate-a/command.ts";
import { benchRoute, printRouteBench } from "./bench/route-throughput.ts";
import { benchUp, printUpBench } from "./bench/up-vs-whole.ts";
import { benchBigModel, printBigBench } from "./bench/big-model.ts";
import { benchPlacement, printPlacementBench } from "./bench/placement.ts";
import { benchTracker, printTrackerBench, TRACKER_BENCH_DEFAULTS } from "./bench/tracker/tracker-bench.ts";
import { ensureDebianPackages } from "../server/toolchain/apt.ts";
import { runChaos } from "./bench/chaos.ts";
import { fuzzAll, printFuzz } from "./fuzz/command.ts";
import { benchWasm, printWasmBench } from "./bench/wasm-vs-native.ts";
import { hostsCommand } from "./hosts/command.ts";
import { runParity } from "./parity/run.ts";
import { openParityModel } from "./parity/parity-model.ts";
import { compareUpstream, printUpstream, upstreamModels } from "./upstream/upstream.ts";
import { printRouteParity, runRouteParity } from "./parity/route-parity.ts";

export function addCheckCommands(program: Command): void {
  program.addCommand(hostsCommand(), { hidden: true });

  program.command("fuzz")
    .description(
      "fuzz every parser a peer's or client's bytes reach (seam frames, relay envelopes, tracker calls, the gateway's JSON, GGUF headers, whole GGUF files loaded by the engine under AddressSanitizer), each in a process of its own",
    )
    .option("--seconds <n>", "time per target", int("seconds"), 60)
    .option("--seed <n>", "the inputs' seed (the same seed gives the same inputs)", int("seed"), 1)
    .option("--target <name...>", "only these targets")
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const rows = await fuzzAll({ seconds: o.seconds, seed: o.seed, targets: o.target });
      console.log(
        o.json
          ? JSON.stringify({ seconds: o.seconds, seed: o.seed, targets: rows }, null, 2)
          : printFuzz(rows),
      );
      // a failure, a crash or a sanitizer report is a finding: the command says so in its status too
      if (rows.some((r) => r.failures > 0 || r.crashes > 0 || r.sanitizer_reports > 0)) Deno.exitCode = 1;
    });

  program.command("parity")
    .description("compare a split run in separate processes with whole-model llama.cpp")
    .option("--model <name|path>", `a catalog model or a GGUF path`, DEFAULT_MODEL.name)
    .option("--split <ranges>", `layer ranges, e.g. 0:12,12:30 (default: the catalog model's)`)
    .addOption(
      new Option(
        "--backend <backend>",
        "engine of the split: a native library, or the WASM engine on CPU or WebGPU (against native whole-model CPU)",
      )
        .choices([...NATIVE_BACKENDS.flatMap((b) => [b, `native-${b}`]), "wasm", "webgpu"])
        .default("native-cpu"),
    )
    .addOption(
      new Option("--host <where>", "where the WASM shards run: Deno processes, or headless Chromium tabs")
        .choices(["process", "chromium"])
        .default("process"),
    )
    .option("--tokens <n>", "greedy decode steps per session", int("tokens"), 32)
    .option("--sessions <n>", "sessions, alone and batched", int("sessions"), 4)
    .option(
      "--prompt-tokens <n>",
      "each prompt at least this long (past a sliding window)",
      int("prompt-tokens"),
      0,
    )
    .option("--threads <n>", "engine threads per process", int("threads"), 2)
    .addOption(
      new Option(
        "--transport <kind>",
        "run the route as node processes over real seams: direct HTTP/2, or the last node through a relay",
      )
        .choices(["direct", "relay"]),
    )
    .option("--engines <list>", "with --transport: each node's engine, e.g. native,wasm,native")
    .addOption(
      new Option("--compression <kind>", "with --transport: hidden states on the seams as f32 or q8 rows")
        .choices(["none", "q8", "q8-row"]).default("none"),
    )
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const { path, name } = await resolveModel(o.model);
      const splitText: string = o.split ?? (catalogModel(o.model) ?? DEFAULT_MODEL).split;
      const wasm = o.backend === "wasm" || o.backend === "webgpu";
      // the WASM engines are compared with native whole-model CPU
      const backend = wasm ? "cpu" : nativeBackend(o.backend);
      await ensureNativeLibrary(backend);
      if (o.host === "chromium" && !wasm) {
        throw new Error("--host chromium runs the WASM engine: --backend wasm|webgpu");
      }
      const engines = o.engines
        ? String(o.engines).split(",") as ("native" | "wasm")[]
        : wasm && o.transport
        ? splitText.split(",").map(() => "wasm" as const)
        : undefined;
      if (engines?.some((e) => e !== "native" && e !== "wasm")) {
        throw new Error("--engines takes native or wasm per node");
      }
      if (engines && !o.transport) throw new Error("--engines needs --transport (node processes)");
      const { tokenizer, facts, prompts, split } = await openParityModel(path, splitText, o.promptTokens);
      try {
        if (o.transport) {
          const report = await runRouteParity({
            modelPath: path,
            modelName: name,
            split,
            nLayer: facts.nLayer,
            backend,
            transport: o.transport,
            engines,
            tokens: o.tokens,
            sessions: o.sessions,
            threads: o.threads,
            tokenizer,
            prompts,
            compression: { none: Compression.NONE, q8: Compression.Q8_BLOCK32, "q8-row": Compression.Q8_ROW }[
              o.compression as "none" | "q8" | "q8-row"
            ],
          });
          console.log(o.json ? JSON.stringify(report, null, 2) : printRouteParity(report));
          if (!report.ok) Deno.exitCode = 1;
          return;
        }
        const report = await runParity({
          modelPath: path,
          modelName: name,
          split,
          backend: wasm ? o.backend : backend,
          host: o.host,
          tokens: o.tokens,
          sessions: o.sessions,
          threads: o.threads,
          tokenizer,
          prompts,
        });
        if (o.json) console.log(JSON.stringify(report, null, 2));
        else printParity(report);
        if (!report.ok) Deno.exitCode = 1;
      } finally {
        tokenizer.close();
      }
    });

  program.command("upstream")
    .description(
      "whole-model logits of the patched engine beside the pinned llama.cpp built without the patch series",
    )
    .option(
      "--model <name|path...>",
      "catalog models or GGUF paths (default: every catalog model and a " +
        "synthetic model of every architecture Strata splits)",
    )
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const models = o.model
        ? await Promise.all((o.model as string[]).map(resolveModel))
        : await upstreamModels();
      const rows = await compareUpstream(models);
      console.log(o.json ? JSON.stringify({ rows }, null, 2) : printUpstream(rows));
      if (!rows.every((r) => r.identical)) Deno.exitCode = 1;
    });

  const bench = program.command("bench")
    .description(
      "benchmarks that print figures (never assert; the parity sweep exits 1 when a case fails); without a subcommand, the whole suite",
    );
  bench.addCommand(suiteCommand(), { isDefault: true });
  bench.addCommand(parityBenchCommand());
  bench.addCommand(hostsBenchCommand());
  bench.addCommand(pinnedBenchCommand());
  bench.addCommand(seamCompressionCommand());
  bench.addCommand(transportBenchCommand());
  bench.addCommand(loadBenchCommand());
  bench.addCommand(constrainedBenchCommand());
  bench.addCommand(invarianceBenchCommand());
  bench.addCommand(kvPoolBenchCommand());
  bench.addCommand(prefixBenchCommand());
  bench.addCommand(snapshotRepairBenchCommand());
  bench.addCommand(longContextBenchCommand());
  bench.addCommand(gateACommand());
  bench.addCommand(verifyCommand());

  bench.command("route")
    .description(
      "decode throughput of a route (1 vs N sessions, beside the whole model) and seam overhead per hop",
    )
    .option("--model <name|path>", `"${DEFAULT_MODEL.name}" or a GGUF path`, DEFAULT_MODEL.name)
    .option("--split <ranges>", "layer ranges", DEFAULT_MODEL.split)
    .addOption(backendOption())
    .addOption(new Option("--transport <kind>", "seams").choices(["direct", "relay"]).default("direct"))
    .option("--sessions <n>", "concurrent sessions", int("sessions"), 8)
    .option("--tokens <n>", "decode steps per session", int("tokens"), 64)
    .option("--threads <n>", "engine threads per node", int("threads"), 1)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const { path, name } = await resolveModel(o.model);
      const backend = nativeBackend(o.backend);
      await ensureNativeLibrary(backend);
      const r = await benchRoute({ ...o, modelPath: path, modelName: name, backend });
      console.log(o.json ? JSON.stringify(r, null, 2) : printRouteBench(r));
    });

  bench.command("up")
    .description("TTFT and decode tok/s through strata up (gateway, tracker, a route) beside the whole model")
    .option("--split <ranges>", "layer ranges of the route", DEFAULT_MODEL.split)
    .addOption(backendOption())
    .option("--threads <n>", "engine threads per node", int("threads"), 1)
    .option("--max-tokens <n>", "tokens per prompt at most", int("max-tokens"), 64)
    .option("--prompts <n>", "prompts", int("prompts"), 8)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const { path } = await resolveModel(DEFAULT_MODEL.name);
      const backend = nativeBackend(o.backend);
      await ensureNativeLibrary(backend);
      const facts = await fileFacts(path);
      const tokenizer = await NativeTokenizer.load(path);
      try {
        const r = await benchUp({
          model: DEFAULT_MODEL.name,
          modelPath: path,
          split: parseSplit(o.split, facts.nLayer),
          backend,
          threads: o.threads,
          newTokens: o.maxTokens,
          prompts: o.prompts,
          tokenizer,
        });
        console.log(o.json ? JSON.stringify(r, null, 2) : printUpBench(r));
      } finally {
        tokenizer.close();
      }
    });

  bench.command("big")
    .description(
      "a synthetic model bigger than any participant (6 GB): certify under the cap, strata up --memory-cap with a tab, a WASM node and native nodes, then native nodes on the same ranges; decode tok/s of each in turns with the whole model, measured alike, and against the route's pipeline ceiling",
    )
    .option("--size <size>", "the model file's size", memorySize, 6e9)
    .option("--cap <size>", "every participant's memory cap", memorySize, 2 * 2 ** 30)
    .option("--sessions <n>", "concurrent sessions", int("sessions"), 16)
    .option("--tokens <n>", "tokens each session decodes", int("tokens"), 32)
    .option(
      "--threads <n>",
      "engine threads per route node (the whole model gets every core)",
      int("threads"),
      1,
    )
    .option("--rounds <n>", "rounds in turns with the whole model, on each route", int("rounds"), 3)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      await ensureNativeLibrary("cpu");
      const r = await benchBigModel({
        sizeBytes: o.size,
        capBytes: o.cap,
        sessions: o.sessions,
        newTokens: o.tokens,
        threads: o.threads,
        rounds: o.rounds,
      });
      console.log(o.json ? JSON.stringify(r, null, 2) : printBigBench(r));
    });

  bench.command("placement")
    .description(
      "placement by measured speed beside an equal split: a WASM node and a native node, each holding four fifths of SmolLM2 at most",
    )
    .option("--json", "print one JSON object")
    .action(async (o) => {
      await ensureNativeLibrary("cpu");
      await resolveModel(DEFAULT_MODEL.name);
      const r = await benchPlacement();
      console.log(o.json ? JSON.stringify(r, null, 2) : printPlacementBench(r));
    });

  const d = TRACKER_BENCH_DEFAULTS;
  bench.command("tracker")
    .description(
      "the control plane at scale: tracker replicas on PostgreSQL, simulated nodes joining, beating, churning and serving routes, one replica killed half-way",
    )
    .option("--nodes <n>", "simulated nodes", int("nodes"), d.nodes)
    .option("--replicas <n>", "tracker replicas", int("replicas"), d.replicas)
    .option("--seconds <n>", "the measured window, once every node joined", int("seconds"), d.seconds)
    .option(
      "--warmup <seconds>",
      "routes asked for at the offered rate before the window, reported apart",
      int("warmup"),
      d.warmupSeconds,
    )
    .option(
      "--churn <fraction>",
      "nodes leaving (and joining) per minute, as a share of the network",
      Number,
      d.churnPerMin,
    )
    .option("--rate <n>", "route requests offered a second (open loop); 0: closed loop", num("rate"), d.rate)
    .option("--workers <n>", "route requests in flight at once, with --rate 0", int("workers"), d.workers)
    .option(
      "--session-tokens <n>",
      "tokens a simulated session decodes",
      int("session-tokens"),
      d.sessionTokens,
    )
    .option("--lease-ms <n>", "the trackers' lease", int("lease-ms"), d.leaseMs)
    .option("--layers <n>", "layers of the synthetic model routed", int("layers"), d.layers)
    .option("--seed <n>", "the simulated network's seed", int("seed"), d.seed)
    .option("--no-kill", "keep every replica running")
    .option("--json", "print one JSON object")
    .action(async (o) => {
      await ensureNativeLibrary("cpu");
      if (!await ensureDebianPackages(["postgresql"])) throw new Error("the bench needs a PostgreSQL server");
      const r = await benchTracker({
        nodes: o.nodes,
        replicas: o.replicas,
        seconds: o.seconds,
        warmupSeconds: o.warmup,
        churnPerMin: o.churn,
        rate: o.rate,
        workers: o.workers,
        sessionTokens: o.sessionTokens,
        leaseMs: o.leaseMs,
        layers: o.layers,
        seed: o.seed,
        kill: o.kill,
      });
      console.log(o.json ? JSON.stringify(r, null, 2) : printTrackerBench(r));
    });

  bench.command("chaos")
    .description(
      "nodes killed one at a time while streamed chats run (strata up --routes 2 and relay-only spares): errors, wrong tokens, repairs and recovery times",
    )
    .option("--kills <n>", "nodes killed, one at a time", int("kills"), 4)
    .option("--sessions <n>", "concurrent streamed chats", int("sessions"), 16)
    .option("--tokens <n>", "tokens each chat asks for", int("tokens"), 96)
    .option("--tab", "a headless tab holds the first range in place of its spare, and is closed first")
    .option("--restart-tracker", "kill the tracker halfway too (strata up starts it again)")
    .option("--restart-gateway", "at the end, kill the gateway under 4 streams (strata up starts it again)")
    .option(
      "--no-compare",
      "skip the second run in which every repair re-prefills the whole route (strata up --no-repair-resume)",
    )
    .option("--json", "print one JSON object")
    .action(async (o) => {
      await ensureNativeLibrary("cpu");
      await resolveModel(DEFAULT_MODEL.name);
      const run = (wholeRoute: boolean) =>
        runChaos({
          kills: o.kills,
          sessions: o.sessions,
          tokens: o.tokens,
          tab: !!o.tab,
          restartTracker: !!o.restartTracker,
          restartGateway: !!o.restartGateway,
          wholeRoute,
          say: (line) => console.error(line),
        });
      const { chats: _, ...summary } = await run(false);
      // the same chaos again with the lost-hop rebuild off: whole-route repairs, side by side
      const whole = o.compare === false ? undefined : await run(true);
      const out = {
        ...summary,
        recover_ms_whole_route_p50: summary.recover_ms_whole_route_p50 ?? whole?.recover_ms_whole_route_p50 ??
          null,
        ...(whole
          ? {
            whole_route_run: {
              errors: whole.errors,
              wrong_tokens: whole.wrong_tokens,
              repairs: whole.repairs,
              recover_ms_p50: whole.recover_ms_p50,
              recover_ms_p95: whole.recover_ms_p95,
              recover_ms_whole_route_p50: whole.recover_ms_whole_route_p50,
              replayed_positions_mean: whole.replayed_positions_mean,
              replayed_layer_positions_mean: whole.replayed_layer_positions_mean,
            },
          }
          : {}),
      };
      console.log(o.json ? JSON.stringify(out) : JSON.stringify(out, null, 2));
    });

  bench.command("wasm")
    .description("the WASM engine (CPU) beside the native CPU engine: load, prefill, decode per layer")
    .option("--prompt <n>", "prompt tokens", int("prompt"), 64)
    .option("--tokens <n>", "decode steps", int("tokens"), 32)
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const { path } = await resolveModel(DEFAULT_MODEL.name);
      await ensureNativeLibrary("cpu");
      const r = await benchWasm({ modelPath: path, prompt: o.prompt, tokens: o.tokens });
      console.log(o.json ? JSON.stringify(r, null, 2) : printWasmBench(r));
    });

  bench.command("memory")
    .description("resident memory of each shard process vs the whole model")
    .option("--model <name|path>", `"${DEFAULT_MODEL.name}" or a GGUF path`, DEFAULT_MODEL.name)
    .option("--split <ranges>", "layer ranges", DEFAULT_MODEL.split)
    .addOption(backendOption())
    .option("--json", "print one JSON object")
    .action(async (o) => {
      const { path, name } = await resolveModel(o.model);
      const r = await benchShardMemory(path, name, o.split, nativeBackend(o.backend));
      console.log(o.json ? JSON.stringify(r, null, 2) : r.table);
    });
}

function printParity(r: Awaited<ReturnType<typeof runParity>>): void {
  const seams = r.max_abs_diff_hidden.map((s) =>
    `after layer ${s.after_layer}: ${s.diff.toExponential(2)} of ${
      s.max_abs.toFixed(0)
    } (tolerance ${s.tolerance_rel})`
  ).join(", ");
  console.log(
    `${r.model} (${r.arch}, ${r.n_layer} layers) split ${r.split} on ${
      r.engine_backends.join(",")
    } (${r.host}),` +
      ` against ${r.reference}`,
  );
  if (r.text !== undefined) console.log(`route output: ${JSON.stringify(r.text)}`);
  const ties = r.alone_divergences.filter((d) => d.kind === "near_tie");
  console.log(
    `greedy tokens: ${
      r.tokens_match ? "identical" : r.tokens_agree ? `identical but ${ties.length} near-tie(s)` : "MISMATCH"
    } over ${r.tokens_compared} steps${
      ties.map((d) =>
        ` (session ${d.session} step ${"step" in d ? d.step : "?"}: gap ${
          "gapSigma" in d ? d.gapSigma.toFixed(3) : "?"
        } σ)`
      ).join("")
    }`,
  );
  console.log(
    `hidden states vs whole: ${seams}: ${r.hidden_within_tolerance ? "within" : "OUTSIDE"}`,
  );
  console.log(
    `batched (${r.sessions} sessions, up to ${r.batched.max_batch_tokens} tokens a batch): ${
      r.batched_match ? "match" : "MISMATCH"
    }${r.batched.near_ties.length ? ` (${r.batched.near_ties.length} near-ties)` : ""}`,
  );
  console.log(
    `release: ${r.release_ok ? "freed exactly its cells" : "WRONG"}; ${r.ok ? "PASS" : "FAIL"} in ${
      r.seconds.toFixed(1)
    } s`,
  );
}
