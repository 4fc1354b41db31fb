// An AddressSanitizer build of the engine library, for the fuzzer (checks/fuzz, target
// `gguf-load`): the same fork, patch series and C API as the CPU library, compiled with
// `-fsanitize=address -fno-omit-frame-pointer` at -O1, and cached in a folder of its own next
// to the normal build (`native/asan-cpu-<key>`; the normal library is never touched).
//
// Loading it: the library is instrumented, Deno is not, so the ASan runtime must be the first
// library of the process: `LD_PRELOAD=$(c++ -print-file-name=libasan.so)`, with libstdc++
// after it (asanEnv says why). Deno (V8) runs under it (tried: it starts, runs FFI calls on
// worker threads, compiles WebAssembly, and its Uint8Array backing stores come from the
// runtime's calloc, so they carry redzones too). `asanEnv()` gives a child process that
// environment; ASAN_OPTIONS below says why each option is set.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { buildDir, checkoutTag } from "../process/paths.ts";
import { cmakeBuild } from "../toolchain/cmake-build.ts";
import { runCommand } from "../process/run.ts";
import { log } from "../log/log.ts";
import { nativeCpuFeatures } from "./cpu-features.ts";
import { cmakeConfigure, forkBuildKey, forkDir, installChecked } from "./native.ts";

const SANITIZE = "-fsanitize=address -fno-omit-frame-pointer";

/** CMake settings beyond the CPU build's (which has none: GGML_NATIVE stays on, as there). */
export const ASAN_CMAKE_ARGS: readonly string[] = [
  // the gateway's chat machinery (llama.cpp's common library) is not what this build checks
  "-DSTRATA_CHAT=OFF",
  // the tree's own switches: libllama (src/) and ggml compiled and linked with ASan
  "-DLLAMA_SANITIZE_ADDRESS=ON",
  "-DGGML_SANITIZE_ADDRESS=ON",
  // api/strata.cpp (the flat C API) is outside both trees' options: the same flags for every
  // file, and the shared library linked against the runtime
  `-DCMAKE_C_FLAGS=${SANITIZE}`,
  `-DCMAKE_CXX_FLAGS=${SANITIZE}`,
  "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address",
  // -O1 (not Release's -O3): ASan's usual level, faster to compile; -g1: file and line in the
  // reports' stacks. NDEBUG as in the library that ships (GGML_ASSERT stays on in both).
  "-DCMAKE_C_FLAGS_RELEASE=-O1 -g1 -DNDEBUG",
  "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -g1 -DNDEBUG",
];

/**
 * The runtime's options for a process hosting the sanitizer library:
 * - detect_leaks=0: LeakSanitizer would report at exit everything the uninstrumented host
 *   (V8, Deno) keeps until the end; leaks are not what the fuzzer looks for;
 * - halt_on_error=1, abort_on_error=0, exitcode=86: the first report ends the process with
 *   status 86 (no core dump), which tells a report from any other death;
 * - allocator_may_return_null=1: malloc of an impossible size returns NULL, as glibc's does,
 *   instead of a report (C++ `new` still reports it: ASan never throws std::bad_alloc);
 * - handle_abort stays 0 (the default): an abort (a failed GGML_ASSERT, std::terminate) is a
 *   crash of its own kind (SIGABRT, with ggml's message), not a memory error;
 * - print_summary=1 (the default, kept): the report's last line names its kind and place.
 */
export const ASAN_OPTIONS =
  "detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=86:allocator_may_return_null=1:print_summary=1";

/** The status a process ends with after an ASan report (ASAN_OPTIONS' exitcode). */
export const ASAN_EXIT_CODE = 86;

const compiler = () => Deno.env.get("CXX") ?? "c++";

function commandLine(cmd: string, args: string[]): string {
  try {
    const out = new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" }).outputSync();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : "";
  } catch {
    return "";
  }
}

/** The compiler's own ASan runtime (GCC's libasan.so), resolved; throws where it has none. */
export function asanRuntime(): string {
  const found = commandLine(compiler(), ["-print-file-name=libasan.so"]);
  // without it the compiler echoes the bare name back
  if (!found.startsWith("/") || !existsSync(found)) {
    throw new Error(
      `no AddressSanitizer runtime for ${compiler()} (${
        found || "no answer"
      }): install GCC's libasan (Debian: libasan8)`,
    );
  }
  return Deno.realPathSync(found);
}

/** The C++ runtime the library links (libstdc++), resolved like the ASan runtime. */
function cxxRuntime(): string | undefined {
  const found = commandLine(compiler(), ["-print-file-name=libstdc++.so"]);
  return found.startsWith("/") && existsSync(found) ? Deno.realPathSync(found) : undefined;
}

/**
 * The environment of a process that loads the sanitizer library through Deno FFI: the ASan
 * runtime preloaded, and libstdc++ with it (and ggml's backtrace off, below). Deno does not link libstdc++, and ASan looks up
 * the real `__cxa_throw` for its interceptor when it starts: with libstdc++ arriving later
 * (with the library) that lookup found nothing, and the first C++ exception the engine threw
 * (the loader refusing a file by throwing, every few inputs) ended the process with
 * "AddressSanitizer: CHECK failed: asan_interceptors.cpp:320 ... real___cxa_throw".
 */
export function asanEnv(): Record<string, string> {
  const preload = Deno.env.get("LD_PRELOAD");
  const libs = [asanRuntime(), cxxRuntime(), preload].filter((l) => l);
  return {
    LD_PRELOAD: libs.join(":"),
    ASAN_OPTIONS,
    // a failed GGML_ASSERT aborts at once: by default ggml first forks to attach gdb to the
    // process, and that fork (of a Deno process under ASan) hung, holding the parent's stderr
    GGML_NO_BACKTRACE: "1",
  };
}

let keyFacts: Record<string, unknown> | undefined;
function settings(): Record<string, unknown> {
  keyFacts ??= {
    backend: "cpu",
    sanitizer: "address",
    flags: ASAN_CMAKE_ARGS,
    cpu: nativeCpuFeatures(),
    // the runtime preloaded at run time must be the compiler's own
    compiler: commandLine(compiler(), ["--version"]).split("\n")[0],
  };
  return keyFacts;
}

async function sanitizerLibraryPath(): Promise<string> {
  return join(buildDir("native", `asan-cpu-${await forkBuildKey(settings())}`), "libstrata.so");
}

/** Path of the cached sanitizer library, without building (STRATA_ASAN_LIB overrides). */
export async function findSanitizerLibrary(): Promise<string | undefined> {
  const override = Deno.env.get("STRATA_ASAN_LIB");
  if (override) return override;
  const lib = await sanitizerLibraryPath();
  return existsSync(lib) ? lib : undefined;
}

/** Path of the AddressSanitizer libstrata.so, building it first when the cache lacks it. */
export async function ensureSanitizerLibrary(): Promise<string> {
  const found = await findSanitizerLibrary();
  if (found) return found;
  const env0 = asanEnv(); // no runtime, no build: say so before minutes of compiling
  const lib = await sanitizerLibraryPath();
  const outDir = lib.slice(0, lib.lastIndexOf("/"));
  const key = outDir.slice(outDir.lastIndexOf("-") + 1);

  const started = performance.now();
  await runCommand(join(forkDir, "materialize.sh"), [], { onLine: (l) => console.error(l) });
  const work = buildDir("native", `build-asan-cpu-${checkoutTag}`);
  console.error("engine: building the AddressSanitizer cpu library (first use only; a few minutes)");
  const env = await cmakeConfigure("cpu", work, ASAN_CMAKE_ARGS);
  const seconds = await cmakeBuild(
    "engine: compiling (cpu, AddressSanitizer)",
    work,
    ["strata"],
    env,
    started,
  );

  // the same smoke check as every build (a real decode of a mixed batch), run under the
  // runtime: a report there fails the build like a crash would
  await installChecked(join(work, "libstrata.so"), lib, {
    backend: "cpu",
    sanitizer: "address",
    key,
    ...settings(),
    runtime: env0.LD_PRELOAD,
    asan_options: ASAN_OPTIONS,
    seconds,
    built: new Date().toISOString(),
  }, env0);
  log.info("engine.built", { backend: "cpu", sanitizer: "address", key, seconds });
  return lib;
}
