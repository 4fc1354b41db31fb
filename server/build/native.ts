// Builds the patched fork as one shared library (libstrata.so) on demand and caches it
// outside the repository, keyed by pin + patches + C API + build flags.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { buildDir, checkoutTag, repoRoot } from "../process/paths.ts";
import { cmakeBuild } from "../toolchain/cmake-build.ts";
import { runCommand } from "../process/run.ts";
import { log } from "../log/log.ts";
import { concatBytes } from "../../src/bytes/concat.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { sha256Hex } from "../../src/gguf/manifest.ts";
import { nativeCpuFeatures } from "./cpu-features.ts";
import { smokeCheck } from "./smoke-check.ts";
import { cudaKeyFacts, cudaToolkit } from "../toolchain/cuda.ts";

export const NATIVE_FLAGS: Record<NativeBackend, readonly string[]> = {
  cpu: [],
  vulkan: ["-DGGML_VULKAN=ON"],
  // the toolkit's paths and the GPU architecture come from cudaToolkit() at build time
  cuda: ["-DGGML_CUDA=ON"],
};

/** Build-key facts beyond the flags: a CUDA build is per toolkit and GPU architecture. */
const backendFacts = (backend: NativeBackend) => backend === "cuda" ? cudaKeyFacts() : {};

export const forkDir = join(repoRoot, "vendor", "llama.cpp");

/** Everything that changes a build's bytes feeds its key: the fork's files and the build's own settings. */
export async function forkBuildKey(settings: unknown): Promise<string> {
  const files = ["pin.json", "CMakeLists.txt"];
  for (const dir of ["api", "patches"]) {
    for (const e of [...Deno.readDirSync(join(forkDir, dir))].sort((a, b) => a.name.localeCompare(b.name))) {
      files.push(join(dir, e.name));
    }
  }
  const parts: Uint8Array[] = files.map((f) => Deno.readFileSync(join(forkDir, f)));
  parts.push(new TextEncoder().encode(JSON.stringify(settings)));
  return (await sha256Hex(concatBytes(parts))).slice(0, 16);
}

/** GGML_NATIVE compiles for this CPU: a library built for another one is never reused. */
const CPU_FEATURES = nativeCpuFeatures();

async function libraryPath(backend: NativeBackend): Promise<string> {
  const key = await forkBuildKey({
    backend,
    flags: NATIVE_FLAGS[backend],
    cpu: CPU_FEATURES,
    ...backendFacts(backend),
  });
  return join(buildDir("native", `${backend}-${key}`), "libstrata.so");
}

/** Path of the cached library for this backend, without building. */
export async function findNativeLibrary(backend: NativeBackend = "cpu"): Promise<string | undefined> {
  const override = Deno.env.get("STRATA_NATIVE_LIB");
  if (override) return override;
  const lib = await libraryPath(backend);
  return existsSync(lib) ? lib : undefined;
}

/** Configures a CMake build of the fork in buildDir, with ccache (paths relative to the
 *  repository) and ninja where present; returns the environment its builds run in. */
export async function cmakeConfigure(
  backend: NativeBackend,
  buildDir: string,
  args: readonly string[],
): Promise<Record<string, string>> {
  const env: Record<string, string> = { CCACHE_BASEDIR: repoRoot, CCACHE_NOHASHDIR: "1" };
  const launcher = hasCommand("ccache")
    ? ["C", "CXX", ...(backend === "cuda" ? ["CUDA"] : [])].map((l) =>
      `-DCMAKE_${l}_COMPILER_LAUNCHER=ccache`
    )
    : [];
  const generator = hasCommand("ninja") ? ["-G", "Ninja"] : [];
  await runCommand("cmake", [
    "-S",
    forkDir,
    "-B",
    buildDir,
    ...generator,
    "-DCMAKE_BUILD_TYPE=Release",
    ...launcher,
    ...args,
  ], { env });
  return env;
}

/** The CMake folder a CPU or Vulkan library is built in (kept: later builds reuse its objects). */
export const nativeBuildDir = (backend: "cpu" | "vulkan"): string =>
  buildDir("native", `build-${backend}-${checkoutTag}`);

/** Path of libstrata.so for this backend, building it first when the cache lacks it. */
export async function ensureNativeLibrary(backend: NativeBackend = "cpu"): Promise<string> {
  const found = await findNativeLibrary(backend);
  if (found) return found;
  const lib = await libraryPath(backend);
  const outDir = lib.slice(0, lib.lastIndexOf("/"));
  const key = outDir.slice(outDir.lastIndexOf("-") + 1);

  const started = performance.now();
  await runCommand(join(forkDir, "materialize.sh"), [], { onLine: (l) => console.error(l) });

  // a CUDA build folder per toolkit and architecture: CMake refuses a changed CUDA compiler
  const work = backend === "cuda" ? buildDir("native", `build-cuda-${key}`) : nativeBuildDir(backend);
  const cuda = backend === "cuda" ? await cudaToolkit() : undefined;
  if (cuda) {
    console.error(`engine: CUDA from ${cuda.source} (${cuda.nvcc}), GPU architecture sm_${cuda.arch}`);
  }
  console.error(`engine: building the native ${backend} library (first use only; a few minutes)`);
  const env = await cmakeConfigure(backend, work, cuda?.cmakeArgs ?? NATIVE_FLAGS[backend]);

  const seconds = await cmakeBuild(`engine: compiling (${backend})`, work, ["strata"], env, started);

  await installChecked(join(work, "libstrata.so"), lib, {
    backend,
    key,
    flags: cuda?.cmakeArgs ?? NATIVE_FLAGS[backend],
    ...backendFacts(backend),
    cpu_features: CPU_FEATURES,
    seconds,
    built: new Date().toISOString(),
  });
  log.info("engine.built", { backend, key, seconds });
  return lib;
}

/**
 * Puts a built library into the cache only after it survived the smoke check (a real
 * decode in a child process, with `env` added to its environment); a library that crashes
 * there leaves nothing behind.
 */
export async function installChecked(
  built: string,
  lib: string,
  record: Record<string, unknown>,
  env?: Record<string, string>,
): Promise<void> {
  const outDir = lib.slice(0, lib.lastIndexOf("/"));
  const staging = `${outDir}.staging-${Deno.pid}`;
  Deno.mkdirSync(staging, { recursive: true });
  try {
    const staged = join(staging, "libstrata.so");
    Deno.copyFileSync(built, staged);
    const smoke = await smokeCheck({ kind: "native", library: staged, env }, CPU_FEATURES);
    Deno.writeTextFileSync(join(staging, "build.json"), JSON.stringify({ ...record, smoke }, null, 2));
    if (existsSync(outDir)) Deno.removeSync(outDir, { recursive: true });
    Deno.renameSync(staging, outDir);
  } finally {
    if (existsSync(staging)) Deno.removeSync(staging, { recursive: true });
  }
}

export function hasCommand(name: string): boolean {
  try {
    return new Deno.Command("sh", { args: ["-c", `command -v ${name}`], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}
