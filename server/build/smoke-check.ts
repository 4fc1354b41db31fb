// A freshly built engine must survive a real decode before it is cached: a child process
// loads a tiny synthetic model through it and decodes a mixed batch of several sequences
// on the same kind of thread a node uses. A library that crashes there (an instruction the
// CPU refuses, a bad tile configuration, …) fails the build with the signal's name and the
// CPU features it was built for, and nothing is cached.
import { signalName } from "../process/exit.ts";
import { DENO_V8_FLAGS } from "../process/v8-flags.ts";

const CHILD = new URL("../engine/smoke/smoke-child.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

export type SmokeTarget =
  // env: more of the child's environment (the sanitizer build's runtime and options)
  | { readonly kind: "native"; readonly library: string; readonly env?: Record<string, string> }
  | { readonly kind: "wasm"; readonly dir: string; readonly flavor: string };

export interface SmokeResult {
  readonly rows: number;
  readonly sequences: number;
  readonly threads: number;
  readonly ms: number;
}

export class SmokeCheckFailed extends Error {}

/** Runs the check; throws SmokeCheckFailed naming the signal or the error. */
export async function smokeCheck(target: SmokeTarget, builtFor: readonly string[]): Promise<SmokeResult> {
  const env: Record<string, string> = target.kind === "native"
    ? { ...target.env, STRATA_NATIVE_LIB: target.library, SMOKE_ENGINE: "native" }
    : { STRATA_WASM_DIR: target.dir, SMOKE_ENGINE: "wasm", SMOKE_FLAVOR: target.flavor };
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", DENO_V8_FLAGS, "--config", CONFIG, CHILD],
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  });
  const out = await child.output();
  const stdout = new TextDecoder().decode(out.stdout).trim();
  const stderr = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-8).join("\n");
  const what = target.kind === "native" ? `native library ${target.library}` : `WASM ${target.flavor} module`;
  const cpu = builtFor.length ? builtFor.join(" ") : "(not known)";
  if (out.signal) {
    throw new SmokeCheckFailed(
      `engine smoke check: the freshly built ${what} died with ${
        signalName(out.signal)
      } decoding a mixed batch ` +
        `(built for CPU features: ${cpu}); nothing was cached.${
          stderr ? `\nits last lines:\n${stderr}` : ""
        }`,
    );
  }
  const last = stdout.split("\n").pop() ?? "";
  if (!out.success || !last.startsWith("{")) {
    throw new SmokeCheckFailed(
      `engine smoke check: the freshly built ${what} failed (exit ${out.code}; built for CPU features: ${cpu}); ` +
        `nothing was cached.\n${stderr || stdout}`,
    );
  }
  return JSON.parse(last) as SmokeResult;
}
