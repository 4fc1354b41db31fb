// Named tensors on seams: packing with a checksum and optional q8 rows, and unpacking
// that trusts nothing a peer sent — sizes are checked against the bytes and the limits
// before anything is allocated.
import { create } from "@bufbuild/protobuf";
import {
  ByteOrder,
  Compression,
  ElementType,
  type Tensor,
  TensorSchema,
} from "../gen/strata/seam/v1/seam_pb.ts";
import { crc32c } from "./crc32c.ts";
import { SeamError } from "./errors.ts";
import { MAX_TENSOR_BYTES, MAX_TENSOR_DIMS } from "./limits.ts";
import { dequantizeBlocks, dequantizeRows, Q8_BLOCK, quantizeBlocks, quantizeRows } from "./q8.ts";

const HOST_LITTLE = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const HOST_ORDER = HOST_LITTLE ? ByteOrder.LITTLE_ENDIAN : ByteOrder.BIG_ENDIAN;

const bytesOf = (a: Float32Array | Int32Array | Int8Array) =>
  new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/**
 * Packs f32 rows ([rows, cols]) or i32 ids ([n]) as a checksummed tensor. The tensor holds
 * a view of `values`: they must not change until the frame is sent.
 */
export function packTensor(
  name: string,
  values: Float32Array | Int32Array,
  shape: readonly number[],
  compression: Compression = Compression.NONE,
): Tensor {
  const isF32 = values instanceof Float32Array;
  if (compression === Compression.Q8_ROW || compression === Compression.Q8_BLOCK32) {
    if (!isF32 || shape.length !== 2) throw new SeamError("bad_tensor", "q8 rows need a 2-D f32 tensor");
    const q = (compression === Compression.Q8_ROW ? quantizeRows : quantizeBlocks)(
      values,
      shape[0],
      shape[1],
    );
    const data = bytesOf(q.values);
    const rowScales = bytesOf(q.scales);
    return create(TensorSchema, {
      name,
      shape: [...shape],
      elementType: ElementType.F32,
      byteOrder: HOST_ORDER,
      compression,
      data,
      rowScales,
      crc32c: crc32c(data, rowScales),
    });
  }
  // no copy: the frame is encoded from the values themselves (a caller hands them over)
  const data = bytesOf(values);
  return create(TensorSchema, {
    name,
    shape: [...shape],
    elementType: isF32 ? ElementType.F32 : ElementType.I32,
    byteOrder: HOST_ORDER,
    compression: Compression.NONE,
    data,
    crc32c: crc32c(data),
  });
}

export interface TensorExpectation {
  readonly name: string;
  readonly elementType: ElementType.F32 | ElementType.I32;
  /** Width of the last dimension (n_embd for hidden states), when fixed. */
  readonly cols?: number;
  /** Rows (tokens) the frame's positions announce. */
  readonly rows?: number;
}

export interface Unpacked {
  readonly shape: number[];
  readonly values: Float32Array | Int32Array;
}

export function unpackTensor(t: Tensor, want: TensorExpectation): Unpacked {
  const bad = (msg: string) => new SeamError("bad_tensor", `tensor "${t.name}": ${msg}`);
  if (t.name !== want.name) throw bad(`expected "${want.name}"`);
  if (t.elementType !== want.elementType) throw bad(`element type ${ElementType[t.elementType]}`);
  if (t.shape.length < 1 || t.shape.length > MAX_TENSOR_DIMS || t.shape.some((d) => d < 1)) {
    throw bad(`shape [${t.shape}] is not 1 to ${MAX_TENSOR_DIMS} positive dimensions`);
  }
  const count = t.shape.reduce((n, d) => n * d, 1);
  if (count * 4 > MAX_TENSOR_BYTES) {
    throw new SeamError("too_large", `tensor "${t.name}" of ${count} elements`);
  }
  const cols = t.shape[t.shape.length - 1];
  const rows = count / cols;
  if (want.cols !== undefined && cols !== want.cols) {
    throw bad(`shape [${t.shape}] does not match the model's width ${want.cols}`);
  }
  if (want.rows !== undefined && rows !== want.rows) throw bad(`${rows} rows for ${want.rows} positions`);
  if (t.byteOrder !== ByteOrder.LITTLE_ENDIAN && t.byteOrder !== ByteOrder.BIG_ENDIAN) {
    throw bad("byte order not set");
  }
  if (crc32c(t.data, t.rowScales) !== t.crc32c) {
    throw new SeamError("checksum", `tensor "${t.name}" does not match its CRC-32C`);
  }
  const swap = t.byteOrder !== HOST_ORDER;
  switch (t.compression) {
    case Compression.NONE: {
      if (t.data.length !== count * 4) throw bad(`${t.data.length} bytes for ${count} elements`);
      // the received bytes themselves where they are aligned and in host order; a copy otherwise
      const aligned = !swap && t.data.byteOffset % 4 === 0;
      const [buffer, at] = aligned ? [t.data.buffer, t.data.byteOffset] : [words(t.data, swap), 0];
      return {
        shape: [...t.shape],
        values: want.elementType === ElementType.F32
          ? new Float32Array(buffer, at, count)
          : new Int32Array(buffer, at, count),
      };
    }
    case Compression.Q8_ROW: {
      if (want.elementType !== ElementType.F32) throw bad("q8 rows carry f32 only");
      if (t.data.length !== count) throw bad(`${t.data.length} bytes for ${count} q8 elements`);
      if (t.rowScales.length !== rows * 4) throw bad(`${t.rowScales.length / 4} scales for ${rows} rows`);
      const values = new Int8Array(copyOf(t.data).buffer);
      const scales = new Float32Array(words(t.rowScales, swap));
      return { shape: [...t.shape], values: dequantizeRows({ values, scales }, rows, cols) };
    }
    case Compression.Q8_BLOCK32: {
      if (want.elementType !== ElementType.F32) throw bad("q8 blocks carry f32 only");
      if (t.data.length !== count) throw bad(`${t.data.length} bytes for ${count} q8 elements`);
      const blocks = rows * Math.ceil(cols / Q8_BLOCK);
      if (t.rowScales.length !== blocks * 4) {
        throw bad(`${t.rowScales.length / 4} scales for ${blocks} blocks`);
      }
      const values = new Int8Array(copyOf(t.data).buffer);
      const scales = new Float32Array(words(t.rowScales, swap));
      return { shape: [...t.shape], values: dequantizeBlocks({ values, scales }, rows, cols) };
    }
    default:
      throw bad(`compression ${t.compression} not supported`);
  }
}

/**
 * A copy on a fresh buffer of exactly its length. (`slice()` is no copy on a Node Buffer,
 * which is what HTTP/2 transports in Node and Deno hand bytes fields over as.)
 */
function copyOf(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(bytes.length);
  out.set(bytes);
  return out;
}

/** 4-byte words in host order (a copy, aligned). */
function words(bytes: Uint8Array, swap: boolean): ArrayBuffer {
  const out = copyOf(bytes);
  if (swap) {
    for (let i = 0; i < out.length; i += 4) {
      [out[i], out[i + 1], out[i + 2], out[i + 3]] = [out[i + 3], out[i + 2], out[i + 1], out[i]];
    }
  }
  return out.buffer;
}
