// A shard's bytes as a file the native engine loads: the artifact's full length, sparse
// on disk (holes where other shards' tensors lie), each present span at its own offset.
import type { SparseModel } from "../../src/artifact/sparse.ts";

export async function writeSparseFile(path: string, m: SparseModel): Promise<void> {
  const tmp = `${path}.${crypto.randomUUID()}.part`;
  const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
  try {
    await f.truncate(m.size);
    for (const s of m.spans) {
      await f.seek(s.offset, Deno.SeekMode.Start);
      for (let put = 0; put < s.bytes.length;) put += await f.write(s.bytes.subarray(put));
    }
  } finally {
    f.close();
  }
  await Deno.rename(tmp, path);
}
