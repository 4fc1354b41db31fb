// The `strata` command line. Each subcommand is a thin shell over one module.
import { Compression } from "../src/gen/strata/seam/v1/seam_pb.ts";
import {
  hostsBenchCommand,
  invarianceBenchCommand,
  loadBenchCommand,
  seamCompressionCommand,
  suiteCommand,
  transportBenchCommand,
} from "../bench/command.ts";
import { hostsCommand } from "./hosts/command.ts";
import { artifactsCommand } from "./artifacts/command.ts";
import { Command, Option } from "commander";
import { parseSplit } from "../src/engine/layer-range.ts";
import { ensureNativeLibrary, findNativeLibrary, NATIVE_BACKENDS } from "./engine/native/build.ts";
import { ensureWasmEngine, findWasmEngine } from "./engine/wasm/build.ts";
import { ensureDebianPackages } from "./util/apt.ts";
import { NativeTokenizer } from "./engine/native/native-tokenizer.ts";
import { resolveModel } from "./model/fetch.ts";
import { modelCommands } from "./model/commands.ts";
import { runParity } from "./parity/run.ts";
import { printRouteParity, runRouteParity } from "./parity/route-parity.ts";
import { DEFAULT_MODEL } from "./model/default-model.ts";
import { fileFacts } from "./model/facts.ts";
import { benchShardMemory } from "../bench/shard-memory.ts";
import { benchRoute, printRouteBench } from "../bench/route-throughput.ts";
import { benchUp, printUpBench } from "../bench/up-vs-whole.ts";
import { benchWasm, printWasmBench } from "../bench/wasm-vs-native.ts";
import { backendOption, int, nativeBackend } from "./util/options.ts";
import { nodeCommand } from "./node/command.ts";
import { relayCommand } from "./relay/command.ts";
import { keyCommand, routeCommand } from "./route/command.ts";
import { trackerCommand } from "./tracker/command.ts";
import { chatCommand, gatewayCommand } from "./gateway/command.ts";
import { upCommand } from "./up/command.ts";

const program = new Command("strata")
  .description("Run GGUF language models across machines, one contiguous layer range per node.")
  .showHelpAfterError();

program.command("build")
  .description("build (or find in the cache) the native engine library")
  .addOption(backendOption())
  .option("--cached-only", "only report a cached build; exit 1 when there is none")
  .option("--wasm", "build the WebAssembly engine instead (needs emscripten)")
  .option("--webgpu", "with --wasm: the flavor with ggml's WebGPU backend")
  .option("--wasm64", "with --wasm: 64-bit memory past 4 GiB (needs emscripten ≥ 4.0)")
  .action(async (o) => {
    if (o.wasm) {
      const flavor = o.webgpu ? "webgpu" : "cpu";
      const opts = { memory64: Boolean(o.wasm64) };
      const dir = o.cachedOnly ? await findWasmEngine(flavor, opts) : await ensureWasmEngine(flavor, opts);
      if (dir) console.log(dir);
      else Deno.exitCode = 1;
      return;
    }
    const backend = nativeBackend(o.backend);
    const lib = o.cachedOnly ? await findNativeLibrary(backend) : await ensureNativeLibrary(backend);
    if (lib) console.log(lib);
    else Deno.exitCode = 1;
  });

program.addCommand(modelCommands());
program.addCommand(keyCommand());
program.addCommand(nodeCommand());
program.addCommand(relayCommand());
program.addCommand(routeCommand());
program.addCommand(trackerCommand());
program.addCommand(gatewayCommand());
program.addCommand(artifactsCommand());
program.addCommand(hostsCommand(), { hidden: true });
program.addCommand(chatCommand());

program.command("parity")
  .description("compare a split run in separate processes with whole-model llama.cpp")
  .option("--model <name|path>", `"${DEFAULT_MODEL.name}" or a GGUF path`, DEFAULT_MODEL.name)
  .option("--split <ranges>", "layer ranges, e.g. 0:12,12:30", DEFAULT_MODEL.split)
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
      ? String(o.split).split(",").map(() => "wasm" as const)
      : undefined;
    if (engines?.some((e) => e !== "native" && e !== "wasm")) {
      throw new Error("--engines takes native or wasm per node");
    }
    if (engines && !o.transport) throw new Error("--engines needs --transport (node processes)");
    const tokenizer = await NativeTokenizer.load(path);
    try {
      const facts = await fileFacts(path);
      if (o.transport) {
        const report = await runRouteParity({
          modelPath: path,
          modelName: name,
          split: parseSplit(o.split, facts.nLayer),
          nLayer: facts.nLayer,
          backend,
          transport: o.transport,
          engines,
          tokens: o.tokens,
          sessions: o.sessions,
          threads: o.threads,
          tokenizer,
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
        split: parseSplit(o.split, facts.nLayer),
        backend: wasm ? o.backend : backend,
        host: o.host,
        tokens: o.tokens,
        sessions: o.sessions,
        threads: o.threads,
        tokenizer,
      });
      if (o.json) console.log(JSON.stringify(report, null, 2));
      else printParity(report);
      if (!report.ok) Deno.exitCode = 1;
    } finally {
      tokenizer.close();
    }
  });

const bench = program.command("bench")
  .description("benchmarks that print figures (never assert); without a subcommand, the whole suite");
bench.addCommand(suiteCommand(), { isDefault: true });
bench.addCommand(hostsBenchCommand());
bench.addCommand(seamCompressionCommand());
bench.addCommand(transportBenchCommand());
bench.addCommand(loadBenchCommand());
bench.addCommand(invarianceBenchCommand());

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
        maxTokens: o.maxTokens,
        prompts: o.prompts,
        tokenizer,
      });
      console.log(o.json ? JSON.stringify(r, null, 2) : printUpBench(r));
    } finally {
      tokenizer.close();
    }
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

program.command("test")
  .description("build the engine, fetch the default model, then run the whole test suite (vitest)")
  .argument("[files...]", "only these test files")
  .action(async (files: string[]) => {
    await ensureNativeLibrary("cpu");
    await resolveModel(DEFAULT_MODEL.name);
    // the WASM, browser and WebGPU tests need emscripten, Chromium and lavapipe, the
    // separate-host test iproute2 (and root); without them those tests skip and say why
    if (await ensureDebianPackages(["emscripten", "chromium", "mesa-vulkan-drivers", "iproute2"])) {
      await ensureWasmEngine("cpu");
      await ensureWasmEngine("webgpu");
    }
    const vitest = new Deno.Command("node", {
      args: [new URL("../node_modules/vitest/vitest.mjs", import.meta.url).pathname, "run", ...files],
      cwd: new URL("..", import.meta.url).pathname,
      stdin: "null",
    });
    Deno.exitCode = (await vitest.spawn().status).code;
  });

program.addCommand(upCommand());

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

try {
  await program.parseAsync(["deno", "strata", ...Deno.args]);
} catch (err) {
  // a refused request is one line; STRATA_DEBUG keeps the stack
  console.error(
    `strata: ${Deno.env.get("STRATA_DEBUG") ? (err as Error).stack : (err as Error).message ?? err}`,
  );
  Deno.exit(1);
}
// a command that returned is done: pthread workers of WASM engines would keep Deno alive
Deno.exit(Deno.exitCode);
