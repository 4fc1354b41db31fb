// Runs the `strata` entry script (or a Deno script) from tests without blocking the test
// worker, and returns what it printed.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

export const root = fileURLToPath(new URL("../..", import.meta.url));
export const deno = `${root}node_modules/.bin/deno`;

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], env: Record<string, string>): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : -1), stdout, stderr }));
  });
}

export const strata = (args: string[], env: Record<string, string> = {}): Promise<Ran> =>
  run(`${root}strata`, args, env);

export const denoRun = (script: string, env: Record<string, string> = {}): Promise<Ran> =>
  run(deno, [
    "run",
    "--allow-all",
    "--quiet",
    "--v8-flags=--no-liftoff",
    "--config",
    `${root}deno.json`,
    script,
  ], env);

/**
 * `strata parity` over node processes, 8 sessions × 16 tokens, one engine thread a node;
 * returns its JSON report.
 */
// deno-lint-ignore no-explicit-any -- a parsed JSON report, read field by field by the tests
export async function routeParity(args: string[]): Promise<Record<string, any>> {
  const r = await strata([
    "parity",
    ...args,
    "--sessions",
    "8",
    "--tokens",
    "16",
    "--threads",
    "1",
    "--json",
  ]);
  if (!r.stdout.startsWith("{")) {
    throw new Error(`strata parity printed no report:\n${r.stderr.slice(-3000)}`);
  }
  return JSON.parse(r.stdout);
}

/** Runs a script with this Node (the one running the tests). */
export const nodeRun = (script: string, args: string[], env: Record<string, string> = {}): Promise<Ran> =>
  run(process.execPath, [script, ...args], env);

/**
 * Starts a `strata` service (node, relay, …) and stops it (SIGTERM) as soon as it prints
 * its one-line JSON "ready" event; `ready` is undefined when it exited (or timed out) first.
 */
export function strataUntilReady(
  args: string[],
  timeoutMs = 60_000,
): Promise<Ran & { ready?: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(`${root}strata`, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let ready: Record<string, unknown> | undefined;
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
    child.stdout.setEncoding("utf8").on("data", (d) => {
      stdout += d;
      const nl = stdout.indexOf("\n");
      if (ready || nl < 0) return;
      ready = JSON.parse(stdout.slice(0, nl));
      child.kill("SIGTERM");
    });
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : -1), stdout, stderr, ready });
    });
  });
}
