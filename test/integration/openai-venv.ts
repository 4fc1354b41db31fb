// The Python `openai` package in a venv of its own (pip-installed once, beside the builds).
import { buildDir } from "../../server/process/paths.ts";

/** The venv's folder (its python is <dir>/bin/python). */
export async function openaiVenv(): Promise<string> {
  const venv = buildDir("python", "openai-sdk");
  const run = async (cmd: string, args: string[]) => {
    const o = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
    if (o.code !== 0) {
      throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(o.stderr).slice(-2000)}`);
    }
  };
  try {
    await Deno.stat(`${venv}/bin/python`);
  } catch {
    await run("python3", ["-m", "venv", venv]);
    await run(`${venv}/bin/pip`, ["install", "--quiet", "openai>=1.50"]);
  }
  return venv;
}
