// The model in the module's in-memory file system (outside the wasm heap), where the
// loader opens it by path.
import { readSparse, type SparseModel } from "../../artifact/sparse.ts";
import type { StrataModule } from "./strata-module.ts";

/**
 * Puts the model where the loader opens it. A sparse model (a shard's download) becomes a
 * file of the artifact's length whose reads come from its spans, zeros elsewhere: the
 * range loader reads only the header and its own tensors, and nothing is copied twice.
 */
export function placeModel(m: StrataModule, path: string, model: Uint8Array | SparseModel): void {
  if (model instanceof Uint8Array) return m.FS.writeFile(path, model);
  m.FS.writeFile(path, new Uint8Array(0));
  const node = m.FS.lookupPath(path).node;
  node.usedBytes = model.size;
  node.stream_ops = {
    ...node.stream_ops,
    read: (_s: unknown, buf: Uint8Array, offset: number, length: number, position: number) =>
      readSparse(model, new Uint8Array(buf.buffer, buf.byteOffset + offset, length), position, length),
    write: () => {
      throw new Error("a sparse model file is read-only");
    },
  };
}
