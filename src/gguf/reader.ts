// Parses a GGUF header (v2/v3, little-endian) from the first bytes of a file, so that a
// browser or a node can learn a model's layout from a small ranged fetch. Every length
// and count read from the file is checked against the bytes at hand before it is used.

import {
  GGML_MAX_DIMS,
  GGML_MAX_NAME,
  ggmlTypeName,
  ggmlTypeTraits,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  type GgufArray,
  GgufError,
  type GgufKv,
  GgufNeedMoreBytes,
  type GgufValue,
  GgufValueType,
  type TensorInfo,
  tensorPlacement,
  VALUE_TYPE_SIZE,
} from "./types.ts";

export { GgufError, GgufNeedMoreBytes } from "./types.ts";

export interface GgufHeader {
  readonly version: number;
  /** Metadata in file order. */
  readonly metadata: ReadonlyMap<string, GgufKv>;
  /** Tensors in file order, with absolute offsets. */
  readonly tensors: readonly TensorInfo[];
  readonly alignment: number;
  /** Bytes of the header proper: magic through the last tensor info. */
  readonly headerSize: number;
  /** Absolute offset of the data section (headerSize rounded up to the alignment). */
  readonly dataOffset: number;
  /** Bytes of the data section, padding after each tensor included. */
  readonly dataSize: number;
}

export interface ParseOptions {
  /**
   * Size of the whole file, when known. Lengths that run past it are then reported as a
   * truncated or corrupt file (GgufError "truncated") instead of GgufNeedMoreBytes.
   */
  readonly fileSize?: number;
}

// Limits far above any real model, low enough that a corrupt count is refused before allocating.
const MAX_STRING_BYTES = 64 * 1024 * 1024;
const MAX_ARRAY_ITEMS = 1 << 26;
const MAX_KV = 1 << 20;
export const MAX_TENSORS = 1 << 20;
const MAX_ARRAY_DEPTH = 8;
// Smallest possible encodings, used to check a count against the bytes that must follow it.
const MIN_KV_BYTES = 8 + 1 + 4 + 1; // key length, 1-byte key, type, 1-byte value
const MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 4 + 8; // name length, 1-byte name, n_dims, type, offset

const utf8 = new TextDecoder("utf-8");
const utf8Encoder = new TextEncoder();

/** Reads little-endian fields and knows whether running out means "fetch more" or "corrupt". */
class Cursor {
  pos = 0;
  private readonly view: DataView;

  constructor(private readonly bytes: Uint8Array, private readonly fileSize: number | undefined) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Makes sure n more bytes are available. */
  need(n: number, what: string): void {
    const end = this.pos + n;
    if (end <= this.bytes.length) return;
    if (this.fileSize !== undefined && (end > this.fileSize || this.bytes.length >= this.fileSize)) {
      throw new GgufError(
        "truncated",
        `${what} at byte ${this.pos} needs ${n} bytes, past the end of the ${this.fileSize}-byte file`,
      );
    }
    throw new GgufNeedMoreBytes(end, this.bytes.length, what);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.pos++);
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  u64Big(what: string): bigint {
    this.need(8, what);
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return v;
  }
  /** A u64 that must fit a JS number (sizes, counts, offsets). */
  u64(what: string, max = Number.MAX_SAFE_INTEGER): number {
    const v = this.u64Big(what);
    if (v > BigInt(max)) throw new GgufError("too_large", `${what} is ${v}, above the limit ${max}`);
    return Number(v);
  }
  string(what: string): string {
    const len = this.u64(`${what} length`, MAX_STRING_BYTES);
    this.need(len, what);
    const s = utf8.decode(this.bytes.subarray(this.pos, this.pos + len));
    this.pos += len;
    return s;
  }

  scalar(type: GgufValueType, what: string): GgufValue {
    const v = this.view;
    const size = VALUE_TYPE_SIZE[type];
    if (size !== undefined) this.need(size, what);
    const p = this.pos;
    switch (type) {
      case GgufValueType.UINT8:
        this.pos += 1;
        return v.getUint8(p);
      case GgufValueType.INT8:
        this.pos += 1;
        return v.getInt8(p);
      case GgufValueType.UINT16:
        this.pos += 2;
        return v.getUint16(p, true);
      case GgufValueType.INT16:
        this.pos += 2;
        return v.getInt16(p, true);
      case GgufValueType.UINT32:
        this.pos += 4;
        return v.getUint32(p, true);
      case GgufValueType.INT32:
        this.pos += 4;
        return v.getInt32(p, true);
      case GgufValueType.FLOAT32:
        this.pos += 4;
        return v.getFloat32(p, true);
      case GgufValueType.BOOL: {
        this.pos += 1;
        const b = v.getUint8(p);
        if (b > 1) throw new GgufError("bad_value", `${what}: bool byte is ${b}, not 0 or 1`);
        return b === 1;
      }
      case GgufValueType.UINT64:
        this.pos += 8;
        return v.getBigUint64(p, true);
      case GgufValueType.INT64:
        this.pos += 8;
        return v.getBigInt64(p, true);
      case GgufValueType.FLOAT64:
        this.pos += 8;
        return v.getFloat64(p, true);
      case GgufValueType.STRING:
        return this.string(what);
      default:
        throw new GgufError("bad_type", `${what} has unknown value type ${type}`);
    }
  }

  value(type: number, what: string, depth = 0): GgufValue {
    if (type !== GgufValueType.ARRAY) return this.scalar(checkValueType(type, what), what);
    if (depth >= MAX_ARRAY_DEPTH) {
      throw new GgufError("too_large", `${what}: arrays nested deeper than ${MAX_ARRAY_DEPTH}`);
    }
    const elementType = checkValueType(this.u32(`${what} element type`), what);
    const n = this.u64(`${what} item count`, MAX_ARRAY_ITEMS);
    // every item takes at least this many bytes: check before allocating n of anything
    const minItem = VALUE_TYPE_SIZE[elementType] ?? (elementType === GgufValueType.STRING ? 8 : 12);
    this.need(n * minItem, `${what} (${n} items)`);
    const items: GgufValue[] = new Array(n);
    for (let i = 0; i < n; i++) items[i] = this.value(elementType, what, depth + 1);
    const arr: GgufArray = { elementType, items };
    return arr;
  }
}

function checkValueType(type: number, what: string): GgufValueType {
  if (!Number.isInteger(type) || type < 0 || type > GgufValueType.FLOAT64) {
    throw new GgufError("bad_type", `${what} has unknown value type ${type}`);
  }
  return type as GgufValueType;
}

const align = (n: number, a: number): number => Math.ceil(n / a) * a;

/**
 * Parses the header of a GGUF file from its first bytes (the whole file works too).
 * Throws GgufNeedMoreBytes when `bytes` ends inside the header, GgufError when the
 * header is malformed.
 */
export function parseGgufHeader(bytes: Uint8Array, options: ParseOptions = {}): GgufHeader {
  const c = new Cursor(bytes, options.fileSize);

  const magic = c.u32("magic");
  if (magic !== GGUF_MAGIC) {
    if (magic === 0x47475546) throw new GgufError("bad_magic", "big-endian GGUF files are not supported");
    throw new GgufError("bad_magic", `not a GGUF file: magic is 0x${magic.toString(16).padStart(8, "0")}`);
  }
  const version = c.u32("version");
  if (version !== 2 && version !== 3) {
    const hint = version === 1 ? " (GGUF v1 predates 64-bit counts; convert the model again)" : "";
    throw new GgufError("unsupported_version", `GGUF version ${version} is not supported${hint}`);
  }

  const tensorCount = c.u64("tensor count", MAX_TENSORS);
  const kvCount = c.u64("metadata count", MAX_KV);
  if (options.fileSize !== undefined) {
    const least = c.pos + kvCount * MIN_KV_BYTES + tensorCount * MIN_TENSOR_INFO_BYTES;
    if (least > options.fileSize) {
      throw new GgufError(
        "truncated",
        `${kvCount} metadata entries and ${tensorCount} tensors cannot fit in a ${options.fileSize}-byte file`,
      );
    }
  }

  const metadata = new Map<string, GgufKv>();
  for (let i = 0; i < kvCount; i++) {
    const key = c.string(`metadata key #${i}`);
    if (key.length === 0) throw new GgufError("bad_value", `metadata key #${i} is empty`);
    if (metadata.has(key)) throw new GgufError("bad_value", `duplicate metadata key '${key}'`);
    const type = checkValueType(c.u32(`type of '${key}'`), `'${key}'`);
    metadata.set(key, { key, type, value: c.value(type, `'${key}'`) });
  }

  const alignment = readAlignment(metadata);

  const raw: Array<{ name: string; shape: number[]; type: number; rel: number; size: number }> = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string(`tensor name #${i}`);
    if (name.length === 0) throw new GgufError("bad_tensor", `tensor #${i} has an empty name`);
    if (utf8Encoder.encode(name).length >= GGML_MAX_NAME) {
      throw new GgufError("bad_tensor", `tensor name '${name}' is ${GGML_MAX_NAME} bytes or longer`);
    }
    if (names.has(name)) throw new GgufError("bad_tensor", `duplicate tensor name '${name}'`);
    names.add(name);

    const nDims = c.u32(`dimension count of '${name}'`);
    if (nDims > GGML_MAX_DIMS) {
      throw new GgufError(
        "bad_tensor",
        `tensor '${name}' has ${nDims} dimensions; ggml allows ${GGML_MAX_DIMS}`,
      );
    }
    const shape: number[] = [];
    for (let d = 0; d < nDims; d++) shape.push(c.u64(`dimension ${d} of '${name}'`));
    const type = c.u32(`type of '${name}'`);
    const traits = ggmlTypeTraits(type);
    if (!traits) throw new GgufError("bad_type", `tensor '${name}' has unknown ggml type ${type}`);
    const rel = c.u64(`offset of '${name}'`);
    raw.push({ name, shape, type, rel, size: checkedTensorBytes(name, shape, type) });
  }

  const headerSize = c.pos;
  const dataOffset = align(headerSize, alignment);

  // ggml requires the tensors to be packed in declaration order, each padded to the alignment
  let expected = 0;
  const tensors: TensorInfo[] = raw.map((t) => {
    if (t.rel !== expected) {
      throw new GgufError(
        "bad_tensor",
        `tensor '${t.name}' starts at data offset ${t.rel}; ggml expects ${expected} (tensors packed in order, ${alignment}-byte aligned)`,
      );
    }
    expected += align(t.size, alignment);
    const offset = dataOffset + t.rel;
    if (options.fileSize !== undefined && offset + t.size > options.fileSize) {
      throw new GgufError(
        "truncated",
        `tensor '${t.name}' ends at byte ${
          offset + t.size
        }, past the end of the ${options.fileSize}-byte file`,
      );
    }
    return { name: t.name, shape: t.shape, type: t.type, offset, size: t.size, ...tensorPlacement(t.name) };
  });

  return { version, metadata, tensors, alignment, headerSize, dataOffset, dataSize: expected };
}

function readAlignment(metadata: ReadonlyMap<string, GgufKv>): number {
  const kv = metadata.get("general.alignment");
  if (!kv) return GGUF_DEFAULT_ALIGNMENT;
  if (kv.type !== GgufValueType.UINT32) {
    throw new GgufError("bad_value", "general.alignment must be a u32");
  }
  const a = kv.value as number;
  if (a === 0 || (a & (a - 1)) !== 0) {
    throw new GgufError("bad_value", `general.alignment ${a} is not a power of two`);
  }
  return a;
}

function checkedTensorBytes(name: string, shape: readonly number[], type: number): number {
  const t = ggmlTypeTraits(type)!;
  const row = shape.length > 0 ? shape[0] : 1;
  if (row % t.blockSize !== 0) {
    throw new GgufError(
      "bad_tensor",
      `tensor '${name}' of type ${
        ggmlTypeName(type)
      } has rows of ${row}, not a multiple of its block size ${t.blockSize}`,
    );
  }
  let n = 1;
  for (const d of shape) {
    n *= d;
    if (n > Number.MAX_SAFE_INTEGER) {
      throw new GgufError("too_large", `tensor '${name}' has more than 2^53 elements`);
    }
  }
  const size = (n / t.blockSize) * t.typeSize;
  if (size > Number.MAX_SAFE_INTEGER) {
    throw new GgufError("too_large", `tensor '${name}' is larger than 2^53 bytes`);
  }
  return size;
}

// ---- metadata accessors ----

/** A string metadata value; undefined when absent, GgufError when present with another type. */
export function metaString(h: GgufHeader, key: string): string | undefined {
  const kv = h.metadata.get(key);
  if (!kv) return undefined;
  if (kv.type !== GgufValueType.STRING) {
    throw new GgufError("missing_key", `metadata '${key}' is not a string`);
  }
  return kv.value as string;
}

/** An array's items, or undefined when the key is absent or not an array. */
export function metaArray(h: GgufHeader, key: string): readonly GgufValue[] | undefined {
  const v = h.metadata.get(key)?.value;
  return typeof v === "object" && v !== null && "items" in v ? (v as GgufArray).items : undefined;
}

/** A numeric metadata value of any integer or float type, as a JS number. */
export function metaNumber(h: GgufHeader, key: string): number | undefined {
  const kv = h.metadata.get(key);
  if (!kv) return undefined;
  const v = kv.value;
  if (typeof v === "number") return v;
  if (typeof v === "bigint") {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new GgufError("too_large", `metadata '${key}' = ${v} does not fit a JS number`);
    }
    return Number(v);
  }
  throw new GgufError("missing_key", `metadata '${key}' is not a number`);
}

/** The model architecture (general.architecture); GgufError when absent. */
export function arch(h: GgufHeader): string {
  const a = metaString(h, "general.architecture");
  if (!a) throw new GgufError("missing_key", "metadata has no general.architecture");
  return a;
}

/** The most blocks a model may declare: llama.cpp itself holds at most 512 (LLAMA_MAX_LAYERS). A
 *  header's word is not trusted further: per-layer tables are sized by it (fuzzing found a
 *  block_count of 2^31 - 1 taking 4.5 GB and 16 s before failing). */
export const MAX_BLOCKS = 512;

/** Number of transformer blocks (<arch>.block_count); GgufError when absent, not a positive
 *  integer, or above MAX_BLOCKS. */
export function blockCount(h: GgufHeader): number {
  const key = `${arch(h)}.block_count`;
  const n = metaNumber(h, key);
  if (n === undefined) throw new GgufError("missing_key", `metadata has no ${key}`);
  if (!Number.isInteger(n) || n <= 0) {
    throw new GgufError("bad_value", `${key} is ${n}, not a positive integer`);
  }
  if (n > MAX_BLOCKS) throw new GgufError("too_large", `${key} is ${n}, above the limit ${MAX_BLOCKS}`);
  return n;
}

/** The trunk's layers: the blocks less the nextn (MTP) layers stored after them, which go
 *  with the output head (a range cuts the trunk only). */
export function trunkLayers(h: GgufHeader): number {
  const key = `${arch(h)}.nextn_predict_layers`;
  const nextn = metaNumber(h, key) ?? 0;
  const blocks = blockCount(h);
  if (!Number.isInteger(nextn) || nextn < 0 || nextn >= blocks) {
    throw new GgufError("bad_value", `${key} is ${nextn}: a trunk of ${blocks} blocks needs fewer`);
  }
  return blocks - nextn;
}
