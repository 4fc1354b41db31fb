// llama.cpp's own distributed inference, for benchmarks beside Strata: `rpc-server` and
// `llama-server` built from the very same pinned tree and patch series (upstream's CMake,
// GGML_RPC on), cached like the engine library.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { buildDir, checkoutTag, repoRoot } from "../process/paths.ts";
import { cmakeBuild } from "../toolchain/cmake-build.ts";
import { runCommand } from "../process/run.ts";
import { log } from "../log/log.ts";
import { forkBuildKey, forkDir, hasCommand } from "./native.ts";

const FLAGS = [
  "-DGGML_RPC=ON",
  "-DLLAMA_BUILD_TOOLS=ON",
  "-DLLAMA_BUILD_SERVER=ON",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DBUILD_SHARED_LIBS=OFF",
  // no web UI: it would be built with npm or downloaded from Hugging Face
  "-DLLAMA_BUILD_UI=OFF",
  "-DLLAMA_USE_PREBUILT_UI=OFF",
];
const TOOLS = ["ggml-rpc-server", "llama-server"] as const;

export interface RpcTools {
  readonly rpcServer: string;
  readonly llamaServer: string;
}

export async function ensureRpcTools(): Promise<RpcTools> {
  const out = buildDir("native", `rpc-${await forkBuildKey({ tools: TOOLS, flags: FLAGS })}`);
  const tools = { rpcServer: join(out, "ggml-rpc-server"), llamaServer: join(out, "llama-server") };
  if (existsSync(tools.rpcServer) && existsSync(tools.llamaServer)) return tools;
  const started = performance.now();
  await runCommand(join(forkDir, "materialize.sh"), [], { onLine: (l) => console.error(l) });
  const work = buildDir("native", `build-rpc-${checkoutTag}`);
  const env: Record<string, string> = { CCACHE_BASEDIR: repoRoot, CCACHE_NOHASHDIR: "1" };
  const launcher = hasCommand("ccache")
    ? ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    : [];
  console.error("bench: building llama.cpp's rpc-server and llama-server from the pin (first use only)");
  await runCommand("cmake", [
    "-S",
    join(forkDir, "tree"),
    "-B",
    work,
    ...(hasCommand("ninja") ? ["-G", "Ninja"] : []),
    "-DCMAKE_BUILD_TYPE=Release",
    ...launcher,
    ...FLAGS,
  ], { env });
  const seconds = await cmakeBuild(
    "bench: compiling (rpc-server, llama-server)",
    work,
    TOOLS,
    env,
    started,
  );
  Deno.mkdirSync(out, { recursive: true });
  for (const t of TOOLS) Deno.copyFileSync(join(work, "bin", t), join(out, t));
  Deno.chmodSync(tools.rpcServer, 0o755);
  Deno.chmodSync(tools.llamaServer, 0o755);
  log.info("engine.built", { what: "llama.cpp rpc tools", seconds });
  return tools;
}
