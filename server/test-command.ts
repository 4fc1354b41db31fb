// `strata test`: the whole suite, after building and fetching what it needs; `--unit`: the
// unit tests alone, at once (no build, fetch or install: they need none).
import { Command } from "commander";
import { ensureNativeLibrary } from "./build/native.ts";
import { ensureWasmEngine } from "./build/wasm.ts";
import { ensureDebianPackages } from "./toolchain/apt.ts";
import { resolveModel } from "./model/fetch.ts";
import { CATALOG } from "./model/default-model.ts";

export function testCommand(): Command {
  return new Command("test")
    .description("build the engine, fetch the catalog models, then run the whole test suite (vitest)")
    .argument("[files...]", "only these test files")
    .option("--unit", "only the unit tests (test/unit), with no build, fetch or install first")
    .action(async (files: string[], o: { unit?: boolean }) => {
      if (!o.unit) await prepare();
      const vitest = new Deno.Command("node", {
        args: [
          new URL("../node_modules/vitest/vitest.mjs", import.meta.url).pathname,
          "run",
          ...(o.unit && files.length === 0 ? ["test/unit"] : files),
        ],
        cwd: new URL("..", import.meta.url).pathname,
        stdin: "null",
      });
      Deno.exitCode = (await vitest.spawn().status).code;
    });
}

async function prepare(): Promise<void> {
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
}
