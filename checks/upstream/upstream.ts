// The upstream check: whole-model logits from the patched tree beside those of the pinned tree
// without Strata's patches, through the same small llama.h program (logits.cpp). The patch
// series only adds layer ranges: a whole-model load must stay bit for bit what llama.cpp does.
import { join } from "node:path";
import { cmakeConfigure, forkDir, NATIVE_FLAGS, nativeBuildDir } from "../../server/build/native.ts";
import { buildDir, checkoutTag } from "../../server/process/paths.ts";
import { runCommand } from "../../server/process/run.ts";
import { cmakeBuild } from "../../server/toolchain/cmake-build.ts";
import { CATALOG } from "../../server/model/default-model.ts";
import { resolveModel } from "../../server/model/fetch.ts";
import { SYNTH_ARCHS, synthModel } from "../../src/model/synth.ts";

export type Flavor = "patched" | "unpatched";

/** The one patch the unpatched build keeps: without it ggml's AMX kernels die with SIGILL on
 *  CPUs that have AMX (docs/engine.md), so no quantized model would run there at all. It
 *  changes no computation (an operand's declared size). */
export const CRASH_FIXES = ["0006-amx-tile-config-operand"];

/** Every catalog model, and a synthetic model of every architecture the synthesizer writes. */
export async function upstreamModels(): Promise<{ name: string; path: string }[]> {
  const dir = await Deno.makeTempDir({ prefix: "strata-upstream-" });
  const synth = SYNTH_ARCHS.map((arch) => {
    const path = join(dir, `${arch}.gguf`);
    Deno.writeFileSync(path, synthModel({ arch, seed: 3 }));
    return { name: `synthetic ${arch}`, path };
  });
  const catalog = await Promise.all(CATALOG.map((m) => resolveModel(m.name)));
  return [...synth, ...catalog];
}

/** Builds the logits tool against one tree: the patched one (vendor/llama.cpp/tree, as the
 *  engine) or the pin with only CRASH_FIXES (vendor/llama.cpp/upstream). */
export async function logitsTool(flavor: Flavor): Promise<string> {
  const started = performance.now();
  await runCommand(join(forkDir, "materialize.sh"), [], {
    env: flavor === "patched" ? {} : { STRATA_PATCHES_ONLY: CRASH_FIXES.join(" ") },
    onLine: (l) => console.error(l),
  });
  // the patched tool is one more target of the CPU engine's own build (the same tree and
  // settings), so it links the llama and ggml objects the engine library was built from
  // instead of compiling them again; the unpatched tree gets a build of its own
  const work = flavor === "patched"
    ? nativeBuildDir("cpu")
    : buildDir("native", `build-logits-unpatched-${checkoutTag}`);
  const env = await cmakeConfigure("cpu", work, flavor === "patched" ? NATIVE_FLAGS.cpu : [
    `-DSTRATA_LLAMA_TREE=${join(forkDir, "upstream")}`,
  ]);
  await cmakeBuild(
    `upstream: compiling the logits tool (${flavor})`,
    work,
    ["strata_logits"],
    env,
    started,
  );
  return join(work, "strata_logits");
}

/** The prompt's last logits and each greedy step's, as the tool wrote them. */
export async function wholeLogits(tool: string, model: string, tokens: readonly number[], steps: number) {
  const out = await Deno.makeTempFile({ suffix: ".f32" });
  try {
    const r = await new Deno.Command(tool, { args: [model, out, tokens.join(","), String(steps)] }).output();
    if (!r.success) throw new Error(`${tool} ${model}: ${new TextDecoder().decode(r.stderr).trim()}`);
    const bytes = await Deno.readFile(out);
    return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  } finally {
    await Deno.remove(out);
  }
}

export interface UpstreamRow {
  readonly model: string;
  readonly floats: number;
  /** every float bit for bit */
  readonly identical: boolean;
  readonly maxAbsDiff: number;
}

/** Each model's whole-model logits through both builds. */
export async function compareUpstream(
  models: readonly { name: string; path: string }[],
  o: { tokens?: readonly number[]; steps?: number } = {},
): Promise<UpstreamRow[]> {
  const patched = await logitsTool("patched");
  const unpatched = await logitsTool("unpatched");
  const tokens = o.tokens ?? [1, 17, 40, 200, 9, 77, 123, 300, 5, 64, 250, 31];
  const rows: UpstreamRow[] = [];
  for (const m of models) {
    const a = await wholeLogits(patched, m.path, tokens, o.steps ?? 8);
    const b = await wholeLogits(unpatched, m.path, tokens, o.steps ?? 8);
    let max = a.length === b.length ? 0 : Infinity;
    const bitsA = new Uint32Array(a.buffer, a.byteOffset, a.length);
    const bitsB = new Uint32Array(b.buffer, b.byteOffset, b.length);
    let identical = a.length === b.length && a.length > 0;
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      if (bitsA[i] !== bitsB[i]) identical = false;
      max = Math.max(max, Math.abs(a[i] - b[i]));
    }
    rows.push({ model: m.name, floats: a.length, identical, maxAbsDiff: max });
  }
  return rows;
}

export function printUpstream(rows: readonly UpstreamRow[]): string {
  return [
    "whole-model logits, patched tree vs the pinned tree without patches (same llama.h program)",
    ...rows.map((r) =>
      `  ${r.model.padEnd(28)} ${String(r.floats).padStart(9)} floats  ${
        r.identical ? "identical" : `DIFFER (max |Δ| ${r.maxAbsDiff.toExponential(2)})`
      }`
    ),
  ].join("\n");
}
