// The header of a GGUF file whose tensor data is written afterwards, piece by piece, so a
// multi-GB model never sits in memory: the same bytes writeGguf would put before and between
// the tensors (metadata from writeGguf itself, then the tensor infos and ggml's padding).

import { type MetadataEntry, writeGguf } from "./writer.ts";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GgufError, tensorBytes } from "./types.ts";

export interface GgufTensorInfo {
  readonly name: string;
  /** ggml ne order: shape[0] is the row length. */
  readonly shape: readonly number[];
  readonly type: number;
}

export interface GgufLayout {
  /** Everything before the first tensor's data, padded to the alignment. */
  readonly header: Uint8Array;
  /** Each tensor's data size and the zero padding that follows it. */
  readonly tensors: ReadonlyArray<{ readonly bytes: number; readonly pad: number }>;
  /** The whole file's size. */
  readonly fileBytes: number;
}

const utf8 = new TextEncoder();
const align = (n: number, a: number) => Math.ceil(n / a) * a;
// writeGguf with alignment 1 appends general.alignment = 1 as the last entry and pads nothing:
// u64 key length 17, the key, u32 type (4: u32), u32 value 1.
const ALIGNMENT_ENTRY = 8 + 17 + 4 + 4;

/** The metadata section exactly as writeGguf writes (and checks) it. */
export function ggufMetadataBytes(metadata: readonly MetadataEntry[]): Uint8Array {
  if (metadata.some(([k]) => k === "general.alignment")) {
    throw new GgufError("bad_value", "a streamed GGUF uses the default alignment");
  }
  const bare = writeGguf({ metadata, tensors: [], alignment: 1 });
  const kvEnd = bare.length - ALIGNMENT_ENTRY;
  const tail = new DataView(bare.buffer, bare.byteOffset + kvEnd, ALIGNMENT_ENTRY);
  if (
    tail.getBigUint64(0, true) !== 17n ||
    new TextDecoder().decode(bare.subarray(kvEnd + 8, kvEnd + 25)) !== "general.alignment"
  ) {
    throw new GgufError("bad_value", "unexpected metadata layout from writeGguf");
  }
  return bare.subarray(24, kvEnd);
}

/** The file's header and layout, at the default alignment (32). */
export function ggufLayout(
  metadata: readonly MetadataEntry[],
  tensors: readonly GgufTensorInfo[],
): GgufLayout {
  return ggufLayoutFromKv(ggufMetadataBytes(metadata), metadata.length, tensors);
}

/** The size of the file with a metadata section of kvBytes bytes: no header is built. */
export function ggufFileBytes(kvBytes: number, tensors: readonly GgufTensorInfo[]): number {
  let at = 24 + kvBytes, data = 0;
  for (const t of tensors) {
    at += 8 + utf8.encode(t.name).length + 4 + 8 * t.shape.length + 4 + 8;
    data += align(tensorBytes(t.shape, t.type), GGUF_DEFAULT_ALIGNMENT);
  }
  return align(at, GGUF_DEFAULT_ALIGNMENT) + data;
}

/**
 * The layout of a file with this metadata section (nKv entries, as another file wrote them)
 * and these tensors, packed in order at `alignment`.
 */
export function ggufLayoutFromKv(
  kv: Uint8Array,
  nKv: number,
  tensors: readonly GgufTensorInfo[],
  alignment = GGUF_DEFAULT_ALIGNMENT,
): GgufLayout {
  const infos: Uint8Array[] = [];
  const sizes: Array<{ bytes: number; pad: number }> = [];
  let rel = 0;
  for (const t of tensors) {
    const name = utf8.encode(t.name);
    const info = new Uint8Array(8 + name.length + 4 + 8 * t.shape.length + 4 + 8);
    const v = new DataView(info.buffer);
    let p = 0;
    v.setBigUint64(p, BigInt(name.length), true);
    info.set(name, p += 8);
    v.setUint32(p += name.length, t.shape.length, true);
    p += 4;
    for (const d of t.shape) {
      v.setBigUint64(p, BigInt(d), true);
      p += 8;
    }
    v.setUint32(p, t.type, true);
    v.setBigUint64(p + 4, BigInt(rel), true);
    infos.push(info);
    const bytes = tensorBytes(t.shape, t.type);
    const padded = align(bytes, alignment);
    sizes.push({ bytes, pad: padded - bytes });
    rel += padded;
  }

  const unpadded = 24 + kv.length + infos.reduce((a, b) => a + b.length, 0);
  const header = new Uint8Array(align(unpadded, alignment));
  const hv = new DataView(header.buffer);
  hv.setUint32(0, GGUF_MAGIC, true);
  hv.setUint32(4, 3, true);
  hv.setBigUint64(8, BigInt(tensors.length), true);
  hv.setBigUint64(16, BigInt(nKv), true);
  let at = 24;
  header.set(kv, at);
  at += kv.length;
  for (const info of infos) {
    header.set(info, at);
    at += info.length;
  }
  return { header, tensors: sizes, fileBytes: header.length + rel };
}
