// sha256 of a file, streamed: model files are large.
import { createHash } from "node:crypto";
import { hexToBytes } from "../../src/bytes/hex.ts";

export async function sha256File(path: string): Promise<string> {
  const h = createHash("sha256");
  const f = await Deno.open(path); // the readable closes it when drained
  for await (const chunk of f.readable) h.update(chunk);
  return h.digest("hex");
}

/** A model file's sha256 as bytes: the Model Artifact id as seams and tickets carry it. */
export async function artifactSha256(path: string): Promise<Uint8Array> {
  return hexToBytes(await sha256File(path));
}
