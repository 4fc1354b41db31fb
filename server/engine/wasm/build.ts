// Builds the same fork with emscripten into strata.mjs + strata.wasm on demand, cached
// like the native library. Needs apt's emscripten (3.1.6): its cache is copied to a
// private writable place, and acorn is found through NODE_PATH (docs/engine.md).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { cacheDir, repoRoot } from "../../util/paths.ts";
import { progress } from "../../util/progress.ts";
import { runCommand } from "../../util/run.ts";
import { log } from "../../util/log.ts";
import { forkBuildKey, forkDir, hasCommand } from "../native/build.ts";

/** cpu: WASM SIMD + pthreads; webgpu: the same plus ggml's WebGPU backend (ASYNCIFY). */
export type WasmFlavor = "cpu" | "webgpu";
export const WASM_FLAVORS: readonly WasmFlavor[] = ["cpu", "webgpu"];

const COMMON = [
  "-DLLAMA_WASM_MEM64=OFF", // wasm64 crashes clang 14 here
  "-DGGML_OPENMP=OFF",
  "-DGGML_NATIVE=OFF",
  // emscripten's platform file says "x86": without this ggml skips its wasm SIMD kernels
  "-DEMSCRIPTEN_SYSTEM_PROCESSOR=wasm32",
];

const FLAGS: Record<WasmFlavor, string[]> = {
  cpu: [...COMMON, "-DGGML_WEBGPU=OFF"],
  webgpu: [...COMMON, "-DGGML_WEBGPU=ON", "-DSTRATA_WASM_WEBGPU=ON"],
};

/** Files the build leaves beside each other: the module, its wasm, and the pthread worker. */
const OUTPUTS = ["strata.mjs", "strata.wasm", "strata.worker.js"];

/** The project's webgpu shim (used on emscripten < 4.0.10) is part of the webgpu flavor's key. */
const SHIM = ["webgpu/include/webgpu/webgpu_cpp.h", "webgpu/library_strata_webgpu.js"];

async function moduleDir(flavor: WasmFlavor): Promise<string> {
  const shim = flavor === "webgpu" ? SHIM.map((f) => Deno.readTextFileSync(join(forkDir, f))) : undefined;
  return cacheDir("wasm", `${flavor}-${await forkBuildKey({ wasm: flavor, flags: FLAGS[flavor], shim })}`);
}

/** Folder holding strata.mjs and strata.wasm, if built. */
export async function findWasmEngine(flavor: WasmFlavor = "cpu"): Promise<string | undefined> {
  const dir = await moduleDir(flavor);
  return existsSync(join(dir, "strata.wasm")) ? dir : undefined;
}

export async function ensureWasmEngine(flavor: WasmFlavor = "cpu"): Promise<string> {
  const found = await findWasmEngine(flavor);
  if (found) return found;
  if (!hasCommand("emcmake")) {
    throw new Error("the WASM engine needs emscripten: apt-get install emscripten (Debian bookworm: 3.1.6)");
  }
  const out = await moduleDir(flavor);
  const started = performance.now();
  await runCommand(join(forkDir, "materialize.sh"), [], { onLine: (l) => console.error(l) });
  const emCache = cacheDir("wasm", "em-cache");
  if (!existsSync(emCache)) {
    Deno.mkdirSync(cacheDir("wasm"), { recursive: true });
    await runCommand("cp", ["-r", "/usr/share/emscripten/cache", emCache]);
  }
  const env = {
    NODE_PATH: "/usr/share/nodejs",
    EM_CACHE: emCache,
    CCACHE_BASEDIR: repoRoot,
    CCACHE_NOHASHDIR: "1",
  };
  const buildDir = cacheDir("wasm", `build-${flavor}`);
  console.error(`engine: building the WASM engine (${flavor}; first use only; a few minutes)`);
  await runCommand("emcmake", [
    "cmake",
    "-S",
    forkDir,
    "-B",
    buildDir,
    "-DCMAKE_BUILD_TYPE=Release",
    ...(hasCommand("ninja") ? ["-G", "Ninja"] : []),
    ...FLAGS[flavor],
  ], { env });
  const bar = progress(`engine: compiling (wasm-${flavor})`, 1);
  await runCommand("cmake", [
    "--build",
    buildDir,
    "--target",
    "strata_wasm",
    "-j",
    String(navigator.hardwareConcurrency ?? 2),
  ], {
    env,
    onLine: (line) => {
      const m = /^\[\s*(\d+)\/(\d+)\]/.exec(line);
      if (m) bar.update(Number(m[1]), Number(m[2]));
    },
  });
  const seconds = (performance.now() - started) / 1000;
  bar.finish(`${seconds.toFixed(0)} s`);
  Deno.mkdirSync(out, { recursive: true });
  for (const f of OUTPUTS) {
    if (existsSync(join(buildDir, f))) Deno.copyFileSync(join(buildDir, f), join(out, f));
  }
  log.info("engine.built", { backend: `wasm-${flavor}`, seconds });
  return out;
}
