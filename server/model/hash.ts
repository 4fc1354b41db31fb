// sha256 of a file, streamed: model files are large.
import { createHash } from "node:crypto";

export async function sha256File(path: string): Promise<string> {
  const h = createHash("sha256");
  const f = await Deno.open(path); // the readable closes it when drained
  for await (const chunk of f.readable) h.update(chunk);
  return h.digest("hex");
}
