// The synthetic llama of 1 GB the big-model tests share, and its signed reference beside it
// (certified under 40 % of its size): made once, kept in the cache (the same seed writes the
// same bytes).
import { cacheDir } from "../../server/process/paths.ts";
import { referenceBeside } from "../../server/model/reference-file.ts";

export const SYNTH_BYTES = 1e9;
export const SYNTH_CAP = Math.floor(0.4 * SYNTH_BYTES);

const strata = new URL("../../strata", import.meta.url).pathname;

export async function runStrata(args: string[]): Promise<string> {
  const o = await new Deno.Command(strata, { args, stdout: "piped", stderr: "inherit" }).output();
  if (o.code !== 0) throw new Error(`strata ${args.join(" ")}: exit ${o.code}`);
  return new TextDecoder().decode(o.stdout);
}

const exists = (p: string) => Deno.stat(p).then(() => true, () => false);

/** The model's path, made when missing; `reference`: its reference too, certified when missing. */
export async function synthLlama1GB(o: { reference?: boolean } = {}): Promise<string> {
  const model = cacheDir("models", "synth-llama-1GB-seed1.gguf");
  if (!await exists(model)) {
    await runStrata([
      "model",
      "synth",
      "--arch",
      "llama",
      "--size",
      "1GB",
      "--seed",
      "1",
      "--out",
      `${model}.part`,
    ]);
    await Deno.rename(`${model}.part`, model);
  }
  const ref = referenceBeside(model);
  if (o.reference && !await exists(ref)) {
    await runStrata(["model", "certify", model, "--memory-cap", String(SYNTH_CAP), "--out", `${ref}.part`]);
    await Deno.rename(`${ref}.part`, ref);
  }
  return model;
}
