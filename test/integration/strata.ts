// Runs the `strata` entry script from tests and returns what it printed.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export const root = fileURLToPath(new URL("../../", import.meta.url));
export const deno = `${root}node_modules/.bin/deno`;

export function strata(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(`${root}strata`, args, {
    encoding: "utf8",
    env: { ...process.env, ...env },
    maxBuffer: 64 << 20,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

export function denoRun(script: string) {
  const r = spawnSync(deno, ["run", "--allow-all", "--quiet", "--config", `${root}deno.json`, script], {
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}
