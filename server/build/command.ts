// `strata build`: the native engine library, or the WebAssembly engine, built once and cached.
import { Command } from "commander";
import { ensureNativeLibrary, findNativeLibrary } from "./native.ts";
import { ensureWasmEngine, findWasmEngine } from "./wasm.ts";
import { backendOption, nativeBackend } from "../cli/options.ts";

export function buildCommand(): Command {
  return new Command("build")
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
}
