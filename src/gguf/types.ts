// The GGUF vocabulary shared by the reader, the writer and the manifest: metadata value
// types, ggml tensor types with their block geometry, and where a tensor sits in the model.

/** Metadata value type ids, as stored in the file (gguf.h `enum gguf_type`). */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;
export type GgufValueType = (typeof GgufValueType)[keyof typeof GgufValueType];

/** Short names the writer accepts for a scalar metadata type. */
export type GgufScalarTypeName =
  | "u8"
  | "i8"
  | "u16"
  | "i16"
  | "u32"
  | "i32"
  | "u64"
  | "i64"
  | "f32"
  | "f64"
  | "bool"
  | "string";

/** A metadata type as the writer is told it: a scalar, or an array of some (possibly array) type. */
export type GgufTypeSpec = GgufScalarTypeName | { readonly array: GgufTypeSpec };

export const SCALAR_TYPE_IDS: Readonly<Record<GgufScalarTypeName, GgufValueType>> = {
  u8: GgufValueType.UINT8,
  i8: GgufValueType.INT8,
  u16: GgufValueType.UINT16,
  i16: GgufValueType.INT16,
  u32: GgufValueType.UINT32,
  i32: GgufValueType.INT32,
  u64: GgufValueType.UINT64,
  i64: GgufValueType.INT64,
  f32: GgufValueType.FLOAT32,
  f64: GgufValueType.FLOAT64,
  bool: GgufValueType.BOOL,
  string: GgufValueType.STRING,
};

/** Fixed byte width of each scalar value type (strings and arrays have none). */
export const VALUE_TYPE_SIZE: Readonly<Partial<Record<GgufValueType, number>>> = {
  [GgufValueType.UINT8]: 1,
  [GgufValueType.INT8]: 1,
  [GgufValueType.UINT16]: 2,
  [GgufValueType.INT16]: 2,
  [GgufValueType.UINT32]: 4,
  [GgufValueType.INT32]: 4,
  [GgufValueType.FLOAT32]: 4,
  [GgufValueType.BOOL]: 1,
  [GgufValueType.UINT64]: 8,
  [GgufValueType.INT64]: 8,
  [GgufValueType.FLOAT64]: 8,
};

/**
 * A metadata value. 64-bit integers are bigint so nothing is rounded; every other
 * number is a JS number. Arrays keep their element type so a round trip is exact.
 */
export type GgufValue = number | bigint | boolean | string | GgufArray;
export interface GgufArray {
  readonly elementType: GgufValueType;
  readonly items: readonly GgufValue[];
}

export interface GgufKv {
  readonly key: string;
  readonly type: GgufValueType;
  readonly value: GgufValue;
}

/** ggml tensor type ids (ggml.h `enum ggml_type`); gaps are ids ggml removed. */
export const GgmlType = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q4_1: 3,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  Q8_1: 9,
  Q2_K: 10,
  Q3_K: 11,
  Q4_K: 12,
  Q5_K: 13,
  Q6_K: 14,
  Q8_K: 15,
  IQ2_XXS: 16,
  IQ2_XS: 17,
  IQ3_XXS: 18,
  IQ1_S: 19,
  IQ4_NL: 20,
  IQ3_S: 21,
  IQ2_S: 22,
  IQ4_XS: 23,
  I8: 24,
  I16: 25,
  I32: 26,
  I64: 27,
  F64: 28,
  IQ1_M: 29,
  BF16: 30,
  TQ1_0: 34,
  TQ2_0: 35,
  MXFP4: 39,
  NVFP4: 40,
  Q1_0: 41,
  Q2_0: 42,
} as const;
export type GgmlType = (typeof GgmlType)[keyof typeof GgmlType];

export interface GgmlTypeTraits {
  /** ggml's own lower-case name, e.g. "q4_K". */
  readonly name: string;
  /** Elements per block: a row's length must be a multiple of it. */
  readonly blockSize: number;
  /** Bytes per block. */
  readonly typeSize: number;
}

// Values checked against ggml_blck_size/ggml_type_size of the pinned build (ggml.c type_traits).
const TRAITS: ReadonlyArray<readonly [GgmlType, string, number, number]> = [
  [GgmlType.F32, "f32", 1, 4],
  [GgmlType.F16, "f16", 1, 2],
  [GgmlType.Q4_0, "q4_0", 32, 18],
  [GgmlType.Q4_1, "q4_1", 32, 20],
  [GgmlType.Q5_0, "q5_0", 32, 22],
  [GgmlType.Q5_1, "q5_1", 32, 24],
  [GgmlType.Q8_0, "q8_0", 32, 34],
  [GgmlType.Q8_1, "q8_1", 32, 36],
  [GgmlType.Q2_K, "q2_K", 256, 84],
  [GgmlType.Q3_K, "q3_K", 256, 110],
  [GgmlType.Q4_K, "q4_K", 256, 144],
  [GgmlType.Q5_K, "q5_K", 256, 176],
  [GgmlType.Q6_K, "q6_K", 256, 210],
  [GgmlType.Q8_K, "q8_K", 256, 292],
  [GgmlType.IQ2_XXS, "iq2_xxs", 256, 66],
  [GgmlType.IQ2_XS, "iq2_xs", 256, 74],
  [GgmlType.IQ3_XXS, "iq3_xxs", 256, 98],
  [GgmlType.IQ1_S, "iq1_s", 256, 50],
  [GgmlType.IQ4_NL, "iq4_nl", 32, 18],
  [GgmlType.IQ3_S, "iq3_s", 256, 110],
  [GgmlType.IQ2_S, "iq2_s", 256, 82],
  [GgmlType.IQ4_XS, "iq4_xs", 256, 136],
  [GgmlType.I8, "i8", 1, 1],
  [GgmlType.I16, "i16", 1, 2],
  [GgmlType.I32, "i32", 1, 4],
  [GgmlType.I64, "i64", 1, 8],
  [GgmlType.F64, "f64", 1, 8],
  [GgmlType.IQ1_M, "iq1_m", 256, 56],
  [GgmlType.BF16, "bf16", 1, 2],
  [GgmlType.TQ1_0, "tq1_0", 256, 54],
  [GgmlType.TQ2_0, "tq2_0", 256, 66],
  [GgmlType.MXFP4, "mxfp4", 32, 17],
  [GgmlType.NVFP4, "nvfp4", 64, 36],
  [GgmlType.Q1_0, "q1_0", 128, 18],
  [GgmlType.Q2_0, "q2_0", 64, 18],
];

const TRAITS_BY_ID: ReadonlyMap<number, GgmlTypeTraits> = new Map(
  TRAITS.map(([id, name, blockSize, typeSize]) => [id, { name, blockSize, typeSize }]),
);

/** Traits of a tensor type id, or undefined for ids ggml does not (or no longer) define. */
export function ggmlTypeTraits(type: number): GgmlTypeTraits | undefined {
  return TRAITS_BY_ID.get(type);
}

export function isGgmlType(type: number): type is GgmlType {
  return TRAITS_BY_ID.has(type);
}

/** ggml's name for a type id ("q8_0"), or "type#N" for an unknown id. */
export function ggmlTypeName(type: number): string {
  return TRAITS_BY_ID.get(type)?.name ?? `type#${type}`;
}

/**
 * Bytes a tensor of this shape (ggml ne order: ne[0] is the row length) and type occupies.
 * Throws a RangeError when the row length is not a whole number of blocks, or the type is unknown.
 */
export function tensorBytes(shape: readonly number[], type: number): number {
  const t = TRAITS_BY_ID.get(type);
  if (!t) throw new RangeError(`unknown ggml type ${type}`);
  const row = shape.length > 0 ? shape[0] : 1;
  if (row % t.blockSize !== 0) {
    throw new RangeError(`row length ${row} is not a multiple of the ${t.name} block size ${t.blockSize}`);
  }
  let n = 1;
  for (const d of shape) n *= d;
  return (n / t.blockSize) * t.typeSize;
}

/** ggml allows at most 4 dimensions and names shorter than 64 bytes (GGML_MAX_DIMS, GGML_MAX_NAME). */
export const GGML_MAX_DIMS = 4;
export const GGML_MAX_NAME = 64;

/** GGUF defaults (gguf.h). */
export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_DEFAULT_ALIGNMENT = 32;

/**
 * Where a tensor belongs when a model is cut into layer ranges:
 * - "layer": a `blk.N.*` tensor, needed only by the shard holding layer N;
 * - "input": token embedding side, needed by the first shard;
 * - "output": final norm and head, needed by the last shard;
 * - "shared": a global tensor every layer reads (e.g. llama3 `rope_freqs`), and any
 *   unrecognised non-block tensor: giving it to every shard is the safe default.
 */
export type TensorRole = "input" | "output" | "layer" | "shared";

export interface TensorInfo {
  readonly name: string;
  /** ggml ne order: shape[0] is the innermost (row) length. */
  readonly shape: readonly number[];
  readonly type: number;
  /** Absolute byte offset of the tensor's data in the file. */
  readonly offset: number;
  /** Bytes of data (without alignment padding). */
  readonly size: number;
  readonly layer: number | null;
  readonly role: TensorRole;
}

// token_embd_norm is an input-side norm (bert, bloom); lfm2 misuses the name for its output norm,
// but lfm2 cannot be loaded as a range anyway.
const INPUT_TENSORS = new Set(["token_embd", "token_types", "position_embd", "token_embd_norm"]);
const OUTPUT_TENSORS = new Set(["output_norm", "output", "cls", "cls_out"]);

/** Layer and role of a tensor, from its name alone. */
export function tensorPlacement(name: string): { layer: number | null; role: TensorRole } {
  const blk = /^blk\.(\d+)\./.exec(name);
  if (blk) return { layer: Number(blk[1]), role: "layer" };
  const stem = name.split(".")[0];
  if (INPUT_TENSORS.has(stem)) return { layer: null, role: "input" };
  if (OUTPUT_TENSORS.has(stem)) return { layer: null, role: "output" };
  return { layer: null, role: "shared" };
}

/** What went wrong with a GGUF file or a GGUF to be written; each code is one cause. */
export type GgufErrorCode =
  | "bad_magic" // not a GGUF file (or a big-endian one)
  | "unsupported_version" // GGUF v1, or newer than v3
  | "truncated" // the file ends before what its header declares
  | "too_large" // a count or length beyond any sane file: refused before allocating
  | "bad_type" // unknown metadata value type or ggml tensor type
  | "bad_value" // a metadata value that breaks the format's rules (empty or duplicate key, bad alignment, ...)
  | "bad_tensor" // a tensor description that breaks ggml's rules (dims, name, block size, offsets)
  | "missing_key" // a metadata key the caller requires is absent or has the wrong type
  | "need_more_bytes"; // only a prefix was given: see GgufNeedMoreBytes

export class GgufError extends Error {
  override name = "GgufError";
  constructor(readonly code: GgufErrorCode, message: string) {
    super(message);
  }
}

/**
 * The bytes given end before the header does. `needed` is a lower bound on the prefix length
 * (from the start of the file) that the next attempt needs; more may be asked for after that.
 */
export class GgufNeedMoreBytes extends GgufError {
  override name = "GgufNeedMoreBytes";
  constructor(readonly needed: number, readonly have: number, what: string) {
    super(
      "need_more_bytes",
      `GGUF header continues past the ${have} bytes given (${what}): need at least ${needed}`,
    );
  }
}
