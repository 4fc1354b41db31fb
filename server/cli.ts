// The `strata` command line. Each subcommand is a thin shell over one module.
import { existsSync } from "node:fs";
import { Command } from "commander";
import { ensureNativeLibrary, findNativeLibrary } from "./engine/native/build.ts";
import { ensureWasmEngine, findWasmEngine } from "./engine/wasm/build.ts";
import { ensureDebianPackages } from "./toolchain/apt.ts";
import { resolveModel } from "./model/fetch.ts";
import { modelCommands } from "./model/commands.ts";
import { CATALOG } from "./model/default-model.ts";
import { backendOption, nativeBackend } from "./cli-options.ts";
import { artifactsCommand } from "./artifacts/command.ts";
import { nodeCommand } from "./node/command.ts";
import { relayCommand } from "./relay/command.ts";
import { keyCommand, routeCommand } from "./route/command.ts";
import { trackerCommand } from "./tracker/command.ts";
import { chatCommand, gatewayCommand, statusCommand } from "./gateway/command.ts";
import { upCommand } from "./up/command.ts";
import { tlsCommand } from "./tls/command.ts";
import { watchParent } from "./process/parent-watch.ts";

watchParent();

const program = new Command("strata")
  .description("Run GGUF language models across machines, one contiguous layer range per node.")
  .showHelpAfterError();

program.command("build")
  .description("build (or find in the cache) the native engine library")
  .addOption(backendOption())
  .option("--cached-only", "only report a cached build; exit 1 when there is none")
  .option(
    "--cuda-arch <sm>",
    "with --backend cuda: the one GPU architecture to compile for, e.g. 90 (default: this machine's GPU, else 90)",
  )
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
    if (o.cudaArch) Deno.env.set("STRATA_CUDA_ARCH", String(o.cudaArch).replace(/^sm_/, ""));
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
program.addCommand(chatCommand());
program.addCommand(statusCommand());
program.addCommand(tlsCommand());

program.command("test")
  .description("build the engine, fetch the catalog models, then run the whole test suite (vitest)")
  .argument("[files...]", "only these test files")
  .action(async (files: string[]) => {
    await ensureNativeLibrary("cpu");
    // every catalog model: the suite runs them all (Gemma 3 270M is the second real model)
    for (const m of CATALOG) await resolveModel(m.name);
    // the WASM, browser and WebGPU tests need emscripten, Chromium and lavapipe, the
    // separate-host test iproute2 (and root); without them those tests skip and say why
    // the tracker-replica test runs a real PostgreSQL server of its own
    await ensureDebianPackages(["postgresql"]);
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

// parity, the benchmarks and test hosts live with the checks, apart from what users deploy;
// a tree without checks/ (a deployment) simply lacks those commands
const checks = new URL("../checks/commands.ts", import.meta.url);
if (existsSync(checks)) {
  const { addCheckCommands } = await import(checks.href);
  addCheckCommands(program);
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
