// Gate A's Python side: a venv of its own with pinned packages from PyPI (installed by the
// bench, never by the tests), and transformers_lane.py run in it.
import { join } from "node:path";
import { cacheDir, repoRoot } from "../../server/process/paths.ts";

/** What the reference lane runs on (torch from PyPI brings its CUDA libraries along, unused here). */
export const PYTHON_PINS = [
  "torch==2.15.0",
  "transformers==5.24.0",
  "safetensors==0.8.0",
  "gguf==0.19.0",
  "numpy==2.4.6",
];

const SCRIPT = join(repoRoot, "checks", "gate-a", "transformers_lane.py");

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

async function run(cmd: string, args: string[], say: (s: string) => void, quiet = false): Promise<string> {
  const child = new Deno.Command(cmd, { args, stdout: "piped", stderr: quiet ? "piped" : "inherit" }).spawn();
  let out = "";
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await lines.read();
    if (done) break;
    out += value;
    // pip prints a line a package: enough to show the install moving
    if (quiet) {
      for (const l of value.split("\n")) if (/^(Collecting|Downloading|Installing)/.test(l)) say(l.trim());
    }
  }
  const status = await child.status;
  if (!status.success) {
    const err = quiet ? await new Response(child.stderr).text() : "";
    throw new Error(`${cmd} ${args.join(" ")} failed (${status.code}): ${err.slice(-2000)}`);
  }
  return out;
}

/** The venv's python, created and filled on first use. */
export async function gateAPython(say: (s: string) => void): Promise<string> {
  const venv = cacheDir(
    "gate-a",
    `venv-${PYTHON_PINS.join("_").replace(/[^A-Za-z0-9.]+/g, "-").slice(0, 60)}`,
  );
  const python = join(venv, "bin", "python");
  const stamp = join(venv, ".strata-ready");
  if (await exists(stamp)) return python;
  say(`creating a Python venv at ${venv}`);
  await run("python3", ["-m", "venv", venv], say);
  say(`installing ${PYTHON_PINS.join(" ")} from PyPI (torch brings about 3 GB of CUDA wheels)`);
  await run(python, ["-m", "pip", "install", "--progress-bar", "off", ...PYTHON_PINS], say, true);
  await Deno.writeTextFile(stamp, PYTHON_PINS.join("\n"));
  return python;
}

/** Runs the lane script; its last stdout line is its JSON answer. */
export async function laneScript<T>(python: string, args: string[], say: (s: string) => void): Promise<T> {
  const out = await run(python, [SCRIPT, ...args], say);
  const last = out.trim().split("\n").pop() ?? "";
  return JSON.parse(last) as T;
}
