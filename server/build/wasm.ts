// Builds the same fork with emscripten into strata.mjs + strata.wasm on demand, cached
// like the native library. Needs apt's emscripten (3.1.6): its cache is copied to a
// private writable place, and acorn is found through NODE_PATH (docs/engine.md).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { buildDir, checkoutTag, repoRoot } from "../process/paths.ts";
import { cmakeBuild } from "../toolchain/cmake-build.ts";
import { runCommand } from "../process/run.ts";
import { log } from "../log/log.ts";
import { forkBuildKey, forkDir, hasCommand } from "./native.ts";
import { adaptGlue } from "./wasm-glue.ts";
import { smokeCheck } from "./smoke-check.ts";
import type { WasmFlavor } from "../../src/engine/wasm/wasm-files.ts";
import { WASM64_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";

export type { WasmFlavor };
export const WASM_FLAVORS: readonly WasmFlavor[] = ["cpu", "webgpu"];

/**
 * wasm64 (MEMORY64) lifts the 4 GiB cap. emscripten 3.1.6's clang 14 crashes compiling ggml
 * for it, so it is an option for newer toolchains (llama.cpp's own wasm64 default assumes 4.x).
 */
export interface WasmBuildOptions {
  memory64?: boolean;
}
export const WASM64_MIN_EMSCRIPTEN = "4.0.0";

const COMMON = [
  "-DGGML_OPENMP=OFF",
  "-DGGML_NATIVE=OFF",
  // emscripten's platform file says "x86": without this ggml skips its wasm SIMD kernels
  "-DEMSCRIPTEN_SYSTEM_PROCESSOR=wasm32",
];

const FLAVOR_FLAGS: Record<WasmFlavor, string[]> = {
  cpu: ["-DGGML_WEBGPU=OFF"],
  webgpu: ["-DGGML_WEBGPU=ON", "-DSTRATA_WASM_WEBGPU=ON"],
};

function flags(flavor: WasmFlavor, o: WasmBuildOptions): string[] {
  const memory = o.memory64
    ? ["-DLLAMA_WASM_MEM64=ON", `-DSTRATA_WASM_MAX_MEMORY=${WASM64_MEMORY_CAP / 2 ** 30}GB`]
    : ["-DLLAMA_WASM_MEM64=OFF"];
  return [...COMMON, ...memory, ...FLAVOR_FLAGS[flavor]];
}

/** `emcc --version`'s number, e.g. "3.1.6" */
function emscriptenVersion(): string {
  const out = new Deno.Command("emcc", { args: ["--version"], stdout: "piped", stderr: "null" }).outputSync();
  return /(\d+\.\d+\.\d+)/.exec(new TextDecoder().decode(out.stdout))?.[1] ?? "0.0.0";
}

function versionAtLeast(v: string, min: string): boolean {
  const [a, b] = [v, min].map((x) => x.split(".").map(Number));
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return true;
}

/** Files the build leaves beside each other: the module, its wasm, and the pthread worker. */
const OUTPUTS = ["strata.mjs", "strata.wasm", "strata.worker.js"];

/** The project's webgpu shim (used on emscripten < 4.0.10) is part of the webgpu flavor's key. */
const SHIM = ["webgpu/include/webgpu/webgpu_cpp.h", "webgpu/library_strata_webgpu.js"];

/** The glue edits are part of every key: files built before an edit are never reused. */
const GLUE = Deno.readTextFileSync(new URL("./wasm-glue.ts", import.meta.url));

function dirName(flavor: WasmFlavor, o: WasmBuildOptions): string {
  return o.memory64 ? `${flavor}-wasm64` : flavor;
}

async function moduleDir(flavor: WasmFlavor, o: WasmBuildOptions): Promise<string> {
  const shim = flavor === "webgpu" ? SHIM.map((f) => Deno.readTextFileSync(join(forkDir, f))) : undefined;
  const key = await forkBuildKey({ wasm: flavor, flags: flags(flavor, o), shim, glue: GLUE });
  return buildDir("wasm", `${dirName(flavor, o)}-${key}`);
}

/** Folder holding strata.mjs and strata.wasm, if built. */
export async function findWasmEngine(
  flavor: WasmFlavor = "cpu",
  o: WasmBuildOptions = {},
): Promise<string | undefined> {
  const dir = await moduleDir(flavor, o);
  return existsSync(join(dir, "strata.wasm")) ? dir : undefined;
}

export async function ensureWasmEngine(
  flavor: WasmFlavor = "cpu",
  o: WasmBuildOptions = {},
): Promise<string> {
  const found = await findWasmEngine(flavor, o);
  if (found) return found;
  if (!hasCommand("emcmake")) {
    throw new Error("the WASM engine needs emscripten: apt-get install emscripten (Debian bookworm: 3.1.6)");
  }
  const version = emscriptenVersion();
  if (o.memory64 && !versionAtLeast(version, WASM64_MIN_EMSCRIPTEN)) {
    throw new Error(
      `a wasm64 build needs emscripten ≥ ${WASM64_MIN_EMSCRIPTEN}; this is ${version}, whose clang crashes compiling ggml for wasm64`,
    );
  }
  const out = await moduleDir(flavor, o);
  const started = performance.now();
  await runCommand(join(forkDir, "materialize.sh"), [], { onLine: (l) => console.error(l) });
  const emCache = buildDir("wasm", "em-cache");
  if (!existsSync(emCache)) {
    Deno.mkdirSync(buildDir("wasm"), { recursive: true });
    await runCommand("cp", ["-r", "/usr/share/emscripten/cache", emCache]);
  }
  const env = {
    NODE_PATH: "/usr/share/nodejs",
    EM_CACHE: emCache,
    CCACHE_BASEDIR: repoRoot,
    CCACHE_NOHASHDIR: "1",
  };
  const work = buildDir("wasm", `build-${dirName(flavor, o)}-${checkoutTag}`);
  console.error(`engine: building the WASM engine (${dirName(flavor, o)}; first use only; a few minutes)`);
  await runCommand("emcmake", [
    "cmake",
    "-S",
    forkDir,
    "-B",
    work,
    "-DCMAKE_BUILD_TYPE=Release",
    ...(hasCommand("ninja") ? ["-G", "Ninja"] : []),
    ...flags(flavor, o),
  ], { env });
  const seconds = await cmakeBuild(
    `engine: compiling (wasm-${flavor})`,
    work,
    ["strata_wasm"],
    env,
    started,
  );
  // staged beside the cache and checked there: a module that crashes its smoke check is never cached
  const staging = `${out}.staging-${Deno.pid}`;
  Deno.mkdirSync(staging, { recursive: true });
  try {
    for (const f of OUTPUTS) {
      if (!existsSync(join(work, f))) continue;
      if (f.endsWith(".wasm")) Deno.copyFileSync(join(work, f), join(staging, f));
      else Deno.writeTextFileSync(join(staging, f), adaptGlue(f, Deno.readTextFileSync(join(work, f))));
    }
    const smoke = await smokeCheck({ kind: "wasm", dir: staging, flavor }, ["wasm32", "simd128"]);
    Deno.writeTextFileSync(join(staging, "build.json"), JSON.stringify({ flavor, seconds, smoke }, null, 2));
    if (existsSync(out)) Deno.removeSync(out, { recursive: true });
    Deno.renameSync(staging, out);
  } finally {
    if (existsSync(staging)) Deno.removeSync(staging, { recursive: true });
  }
  log.info("engine.built", { backend: `wasm-${flavor}`, seconds });
  return out;
}
