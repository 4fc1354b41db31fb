// Where a model's reference file lives: beside the model (as its publisher ships it), or in
// the cache (as `strata up` certifies a model it was handed).
import { dirname } from "node:path";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { cacheDir } from "../process/paths.ts";
import { sha256File } from "./hash.ts";
import { ServiceProcess } from "../process/service-process.ts";

export const referenceBeside = (modelPath: string) => `${modelPath}.strata-ref`;
export const referenceInCache = (artifact: string) => cacheDir("references", `${artifact}.strata-ref`);

/** The first reference file there is for this model, or undefined. */
export async function findReference(modelPath: string, artifact: string): Promise<string | undefined> {
  for (const p of [referenceBeside(modelPath), referenceInCache(artifact)]) {
    try {
      if ((await Deno.stat(p)).isFile) return p;
    } catch { /* not there */ }
  }
  return undefined;
}

/**
 * The model's reference file, certified into the cache when there is none yet (for a local
 * network whose operator holds the model: `strata up`, the checks). Its publisher key is
 * this machine's.
 */
export async function ensureReference(
  modelPath: string,
  o: { backend: NativeBackend; capBytes?: number },
): Promise<string> {
  const artifact = await sha256File(modelPath);
  const found = await findReference(modelPath, artifact);
  if (found) return found;
  const path = referenceInCache(artifact);
  await Deno.mkdir(dirname(path), { recursive: true });
  // written whole under a name of its own, then renamed: a reader (or another process
  // certifying the same model at once) never sees half a file
  const part = `${path}.${Deno.pid}.${crypto.randomUUID()}.part`;
  // in a process of its own: an engine that crashes is named, and what it held goes with it
  const certifying = await ServiceProcess.start(
    "certify",
    [
      "model",
      "certify",
      modelPath,
      "--memory-cap",
      String(o.capBytes ?? Deno.systemMemoryInfo().available),
      "--backend",
      o.backend,
      "--out",
      part,
    ],
    {},
    3_600_000,
  );
  await certifying.child.status;
  await Deno.rename(part, path);
  return path;
}
