// An artifact's manifest with piece hashes, built from the file once and cached beside
// the other caches (keyed by path, size and mtime, so a replaced file is hashed again).
import { createHash } from "node:crypto";
import { buildManifest } from "../../src/gguf/manifest.ts";
import { type ArtifactManifest, pieceSpans } from "../../src/artifact/pieces.ts";
import { readHeader } from "../model/facts.ts";
import { sha256File } from "../model/hash.ts";
import { cacheDir } from "../process/paths.ts";
import { log } from "../log/log.ts";
import { progress } from "../log/progress.ts";

export async function artifactManifest(path: string): Promise<ArtifactManifest> {
  const st = await Deno.stat(path);
  const key = createHash("sha256").update(`v2|${path}|${st.size}|${st.mtime?.getTime()}`).digest("hex").slice(
    0,
    16,
  );
  const cached = cacheDir("manifests", `${key}.json`);
  try {
    return JSON.parse(await Deno.readTextFile(cached)) as ArtifactManifest;
  } catch { /* not built yet */ }
  const t0 = performance.now();
  const m = buildManifest(await readHeader(path), st.size, await sha256File(path));
  const file = await Deno.open(path);
  // a large model takes a while: once per file, then cached
  const bar = progress(`artifact: hashing the pieces of ${path.split("/").pop()}`, st.size);
  try {
    const pieces = [];
    let done = 0;
    for (const [offset, size] of pieceSpans(m)) {
      const bytes = new Uint8Array(size);
      await file.seek(offset, Deno.SeekMode.Start);
      for (let got = 0; got < size;) {
        const n = await file.read(bytes.subarray(got));
        if (n === null) throw new Error(`${path} ends inside the piece at ${offset}`);
        got += n;
      }
      pieces.push({ offset, size, sha256: createHash("sha256").update(bytes).digest("hex") });
      bar.update(done += size, st.size);
    }
    bar.finish(`${pieces.length} pieces`);
    const full: ArtifactManifest = { ...m, pieces };
    Deno.mkdirSync(cacheDir("manifests"), { recursive: true });
    await Deno.writeTextFile(cached, JSON.stringify(full));
    log.info("artifact.manifest", {
      artifact: m.artifact,
      pieces: pieces.length,
      ms: Math.round(performance.now() - t0),
    });
    return full;
  } finally {
    file.close();
  }
}
