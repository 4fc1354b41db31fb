// A shard as a GGUF file of its own: the artifact's metadata as it is, and only the tensors
// its range loads, packed. wasm32 llama.cpp sizes files and offsets in a 32-bit size_t, so it
// cannot open an artifact whose data passes 4 GiB even to read one layer of it; its own
// range always fits (the wasm32 memory cap). Built from views of the bytes already held: no
// tensor is copied.
import { buildManifest, shardBytes } from "../gguf/manifest.ts";
import { type GgufHeader, parseGgufHeader } from "../gguf/reader.ts";
import { ggufLayoutFromKv } from "../gguf/stream.ts";
import type { SparseModel } from "./sparse.ts";

const utf8 = new TextEncoder();

/**
 * The file a range loads from: its own shard GGUF, made from the model's bytes (whole, or a
 * sparse download of the range); undefined when the header does not parse or the model has
 * no such range (the loader then says what is wrong with the bytes as they are).
 */
export function rangeFile(
  file: Uint8Array | SparseModel,
  range: { readonly start: number; readonly end: number },
): SparseModel | undefined {
  const model = file instanceof Uint8Array
    ? { size: file.length, spans: [{ offset: 0, bytes: file }] }
    : file;
  const first = model.spans[0];
  if (first?.offset !== 0) return undefined;
  let header: GgufHeader, needs: ReturnType<typeof shardBytes>;
  try {
    header = parseGgufHeader(first.bytes, { fileSize: model.size });
    needs = shardBytes(buildManifest(header, model.size, "0".repeat(64)), range.start, range.end);
  } catch {
    // not a GGUF, or a range the model does not have
    return undefined;
  }
  return compactShard(
    header,
    first.bytes.subarray(0, header.headerSize),
    new Set(needs.tensors.map((t) => t.name)),
    (offset, size) => sparseBytes(model, offset, size),
  );
}

/**
 * `headerBytes`: the artifact's bytes from 0 through its header; `keep`: the names of the
 * tensors the range loads; `bytesOf`: a tensor's data, by its offset and size in the artifact.
 */
export function compactShard(
  header: GgufHeader,
  headerBytes: Uint8Array,
  keep: ReadonlySet<string>,
  bytesOf: (offset: number, size: number) => Uint8Array,
): SparseModel {
  // the metadata section ends where the tensor infos begin: the header less their encodings
  const infos = header.tensors.reduce(
    (n, t) => n + 8 + utf8.encode(t.name).length + 4 + 8 * t.shape.length + 4 + 8,
    0,
  );
  const kv = headerBytes.subarray(24, header.headerSize - infos);
  const kept = header.tensors.filter((t) => keep.has(t.name));
  const l = ggufLayoutFromKv(kv, header.metadata.size, kept, header.alignment);
  const spans = [{ offset: 0, bytes: l.header }];
  let at = l.header.length;
  kept.forEach((t, i) => {
    spans.push({ offset: at, bytes: bytesOf(t.offset, t.size) });
    at += l.tensors[i].bytes + l.tensors[i].pad;
  });
  return { size: l.fileBytes, spans };
}

/** A view of [offset, offset + size) of a sparse model, copied only if it spans two pieces. */
export function sparseBytes(m: SparseModel, offset: number, size: number): Uint8Array {
  for (const s of m.spans) {
    if (s.offset <= offset && offset + size <= s.offset + s.bytes.length) {
      return s.bytes.subarray(offset - s.offset, offset - s.offset + size);
    }
  }
  const out = new Uint8Array(size);
  for (const s of m.spans) {
    const from = Math.max(offset, s.offset), to = Math.min(offset + size, s.offset + s.bytes.length);
    if (from < to) out.set(s.bytes.subarray(from - s.offset, to - s.offset), from - offset);
  }
  return out;
}
