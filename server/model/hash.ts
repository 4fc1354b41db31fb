// sha256 of a file, streamed (model files are large), with progress for a large one, and cached:
// a file whose device, inode, size, mtime and ctime are unchanged is not read again (ctime moves
// on any write, and user space cannot set it back).
import { createHash } from "node:crypto";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { progress } from "../log/progress.ts";
import { cacheDir } from "../process/paths.ts";

/** Files at least this large say how far their hash is. */
const SHOW_PROGRESS_BYTES = 256 * 2 ** 20;

export async function sha256File(path: string): Promise<string> {
  const st = await Deno.stat(path);
  const key = [st.dev, st.ino, st.size, st.mtime?.getTime(), st.ctime?.getTime()].join(":");
  const name = createHash("sha256").update(`${await Deno.realPath(path)}\0${key}`).digest("hex").slice(0, 32);
  const cached = `${cacheDir("hashes")}/${name}`;
  try {
    const hex = (await Deno.readTextFile(cached)).trim();
    if (/^[0-9a-f]{64}$/.test(hex)) return hex;
  } catch {
    // not hashed yet
  }
  const hex = await hashStream(path, st.size);
  await Deno.mkdir(cacheDir("hashes"), { recursive: true });
  await Deno.writeTextFile(cached, hex + "\n");
  return hex;
}

async function hashStream(path: string, size: number): Promise<string> {
  const h = createHash("sha256");
  const shown = size >= SHOW_PROGRESS_BYTES
    ? progress(`hashing ${path.split("/").pop()}`, Math.ceil(size / 2 ** 20))
    : undefined;
  let done = 0;
  const f = await Deno.open(path); // the readable closes it when drained
  for await (const chunk of f.readable) {
    h.update(chunk);
    done += chunk.length;
    shown?.update(Math.floor(done / 2 ** 20));
  }
  shown?.finish(`${Math.round(size / 2 ** 20)} MiB`);
  return h.digest("hex");
}

/** A model file's sha256 as bytes: the Model Artifact id as seams and tickets carry it. */
export async function artifactSha256(path: string): Promise<Uint8Array> {
  return hexToBytes(await sha256File(path));
}
