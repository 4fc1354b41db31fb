// Writes GGUF v3 files: typed metadata, tensor infos with offsets relative to the data
// section, and tensor data packed in order, each tensor padded to the alignment exactly
// as ggml's own writer does (llama.cpp refuses any other layout).

import {
  GGML_MAX_DIMS,
  GGML_MAX_NAME,
  ggmlTypeName,
  ggmlTypeTraits,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  type GgufArray,
  GgufError,
  type GgufTypeSpec,
  GgufValueType,
  SCALAR_TYPE_IDS,
  tensorBytes,
} from "./types.ts";

/**
 * A value the writer accepts. Without an explicit type it is inferred:
 * string → string, boolean → bool, bigint → u64 (i64 when negative),
 * integer number → u32 when in [0, 2^32), i32 when negative and ≥ -2^31, i64 beyond,
 * other numbers → f32. A JS array takes its element type from its first item, a typed
 * array from its kind (Float32Array → f32, Int32Array → i32, ...), a GgufArray (as the
 * reader returns it) keeps its element type. Give the type when a float happens to be whole.
 */
export type GgufWritable =
  | number
  | bigint
  | boolean
  | string
  | GgufArray
  | readonly GgufWritable[]
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

/** The type may also be a raw GgufValueType id, as the reader reports it (ARRAY then needs a GgufArray value). */
export type MetadataEntry = readonly [key: string, value: GgufWritable, type?: GgufTypeSpec | GgufValueType];

export interface GgufTensorInput {
  readonly name: string;
  /** ggml ne order: shape[0] is the row length. */
  readonly shape: readonly number[];
  /** ggml type id (GgmlType). */
  readonly type: number;
  /** Exactly tensorBytes(shape, type) bytes, already in ggml's layout for the type. */
  readonly data: Uint8Array;
}

export interface GgufWriteInput {
  readonly metadata: readonly MetadataEntry[];
  readonly tensors: readonly GgufTensorInput[];
  /** Data alignment; written as general.alignment when not the default 32. */
  readonly alignment?: number;
}

/** A resolved metadata type; for an array of arrays, `elem.elem` undefined means "each inner array says". */
interface Spec {
  readonly id: GgufValueType;
  readonly elem?: Spec;
}

const utf8 = new TextEncoder();
const align = (n: number, a: number): number => Math.ceil(n / a) * a;

/** Serializes a whole GGUF v3 file. Throws GgufError on anything llama.cpp would refuse. */
export function writeGguf(input: GgufWriteInput): Uint8Array {
  const metadata = withAlignment(input.metadata, input.alignment);
  const alignment = input.alignment ?? alignmentOf(metadata) ?? GGUF_DEFAULT_ALIGNMENT;

  const sink = new Sink();
  sink.u32(GGUF_MAGIC);
  sink.u32(3);
  sink.u64(input.tensors.length);
  sink.u64(metadata.length);

  const keys = new Set<string>();
  for (const [key, value, type] of metadata) {
    if (key.length === 0) throw new GgufError("bad_value", "metadata key is empty");
    if (keys.has(key)) throw new GgufError("bad_value", `duplicate metadata key '${key}'`);
    keys.add(key);
    const spec = type === undefined ? inferSpec(value, `'${key}'`) : fromTypeSpec(type);
    sink.string(key);
    sink.u32(spec.id);
    writeValue(sink, value, spec, `'${key}'`);
  }

  const names = new Set<string>();
  let rel = 0;
  const placed = input.tensors.map((t) => {
    checkTensor(t, names);
    sink.string(t.name);
    sink.u32(t.shape.length);
    for (const d of t.shape) sink.u64(d);
    sink.u32(t.type);
    sink.u64(rel);
    const at = rel;
    rel += align(t.data.length, alignment);
    return { at, data: t.data };
  });

  const dataOffset = align(sink.length, alignment);
  const out = new Uint8Array(dataOffset + rel);
  out.set(sink.bytes());
  for (const p of placed) out.set(p.data, dataOffset + p.at);
  return out;
}

function withAlignment(
  metadata: readonly MetadataEntry[],
  alignment: number | undefined,
): readonly MetadataEntry[] {
  if (alignment === undefined) return metadata;
  if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
    throw new GgufError("bad_value", `alignment ${alignment} is not a power of two`);
  }
  const given = alignmentOf(metadata);
  if (given !== undefined && given !== alignment) {
    throw new GgufError("bad_value", `alignment ${alignment} disagrees with general.alignment ${given}`);
  }
  if (given !== undefined || alignment === GGUF_DEFAULT_ALIGNMENT) return metadata;
  return [...metadata, ["general.alignment", alignment, "u32"]];
}

function alignmentOf(metadata: readonly MetadataEntry[]): number | undefined {
  const entry = metadata.find(([k]) => k === "general.alignment");
  if (!entry) return undefined;
  const [, value, type] = entry;
  if ((type !== undefined && type !== "u32") || typeof value !== "number") {
    throw new GgufError("bad_value", "general.alignment must be a u32");
  }
  if (!Number.isInteger(value) || value <= 0 || (value & (value - 1)) !== 0) {
    throw new GgufError("bad_value", `general.alignment ${value} is not a power of two`);
  }
  return value;
}

function checkTensor(t: GgufTensorInput, names: Set<string>): void {
  const nameBytes = utf8.encode(t.name).length;
  if (nameBytes === 0 || nameBytes >= GGML_MAX_NAME) {
    throw new GgufError("bad_tensor", `tensor name '${t.name}' must be 1..${GGML_MAX_NAME - 1} bytes`);
  }
  if (names.has(t.name)) throw new GgufError("bad_tensor", `duplicate tensor name '${t.name}'`);
  names.add(t.name);
  if (t.shape.length > GGML_MAX_DIMS || t.shape.some((d) => !Number.isSafeInteger(d) || d < 0)) {
    throw new GgufError("bad_tensor", `tensor '${t.name}' has an invalid shape [${t.shape.join(", ")}]`);
  }
  if (!ggmlTypeTraits(t.type)) {
    throw new GgufError("bad_type", `tensor '${t.name}' has unknown ggml type ${t.type}`);
  }
  let size: number;
  try {
    size = tensorBytes(t.shape, t.type);
  } catch (e) {
    throw new GgufError("bad_tensor", `tensor '${t.name}': ${(e as Error).message}`);
  }
  if (t.data.length !== size) {
    throw new GgufError(
      "bad_tensor",
      `tensor '${t.name}' (${ggmlTypeName(t.type)} [${
        t.shape.join(", ")
      }]) needs ${size} bytes of data, got ${t.data.length}`,
    );
  }
}

// ---- metadata types ----

function fromTypeSpec(spec: GgufTypeSpec | GgufValueType): Spec {
  if (typeof spec === "number") {
    if (!Number.isInteger(spec) || spec < 0 || spec > GgufValueType.FLOAT64) {
      throw new GgufError("bad_type", `unknown metadata type ${spec}`);
    }
    return { id: spec };
  }
  if (typeof spec === "string") {
    const id = SCALAR_TYPE_IDS[spec];
    if (id === undefined) throw new GgufError("bad_type", `unknown metadata type '${spec}'`);
    return { id };
  }
  return { id: GgufValueType.ARRAY, elem: fromTypeSpec(spec.array) };
}

function isGgufArray(v: unknown): v is GgufArray {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v) &&
    "elementType" in v;
}

function typedArrayType(v: ArrayBufferView): GgufValueType | undefined {
  if (v instanceof Float32Array) return GgufValueType.FLOAT32;
  if (v instanceof Float64Array) return GgufValueType.FLOAT64;
  if (v instanceof Int8Array) return GgufValueType.INT8;
  if (v instanceof Uint8Array) return GgufValueType.UINT8;
  if (v instanceof Int16Array) return GgufValueType.INT16;
  if (v instanceof Uint16Array) return GgufValueType.UINT16;
  if (v instanceof Int32Array) return GgufValueType.INT32;
  if (v instanceof Uint32Array) return GgufValueType.UINT32;
  if (v instanceof BigInt64Array) return GgufValueType.INT64;
  if (v instanceof BigUint64Array) return GgufValueType.UINT64;
  return undefined;
}

function inferSpec(v: GgufWritable, what: string): Spec {
  switch (typeof v) {
    case "string":
      return { id: GgufValueType.STRING };
    case "boolean":
      return { id: GgufValueType.BOOL };
    case "bigint":
      return { id: v < 0n ? GgufValueType.INT64 : GgufValueType.UINT64 };
    case "number":
      if (!Number.isInteger(v)) return { id: GgufValueType.FLOAT32 };
      if (v >= 0 && v <= 0xffffffff) return { id: GgufValueType.UINT32 };
      if (v < 0 && v >= -0x80000000) return { id: GgufValueType.INT32 };
      return { id: GgufValueType.INT64 };
  }
  if (ArrayBuffer.isView(v)) {
    const id = typedArrayType(v);
    if (id === undefined) throw new GgufError("bad_type", `${what}: unsupported typed array`);
    return { id: GgufValueType.ARRAY, elem: { id } };
  }
  if (isGgufArray(v)) return { id: GgufValueType.ARRAY, elem: { id: v.elementType } };
  if (Array.isArray(v)) {
    if (v.length === 0) {
      throw new GgufError("bad_type", `${what}: cannot infer the type of an empty array; give one`);
    }
    const first = inferSpec(v[0], what);
    // inner arrays each carry their own element type in the file
    return {
      id: GgufValueType.ARRAY,
      elem: first.id === GgufValueType.ARRAY ? { id: GgufValueType.ARRAY } : first,
    };
  }
  throw new GgufError("bad_type", `${what}: cannot write a value of type ${typeof v}`);
}

const INT_RANGES: Partial<Record<GgufValueType, readonly [number, number]>> = {
  [GgufValueType.UINT8]: [0, 0xff],
  [GgufValueType.INT8]: [-0x80, 0x7f],
  [GgufValueType.UINT16]: [0, 0xffff],
  [GgufValueType.INT16]: [-0x8000, 0x7fff],
  [GgufValueType.UINT32]: [0, 0xffffffff],
  [GgufValueType.INT32]: [-0x80000000, 0x7fffffff],
};

function writeValue(sink: Sink, v: GgufWritable, spec: Spec, what: string): void {
  const bad = (): never => {
    throw new GgufError("bad_value", `${what}: ${String(v)} is not a valid ${typeLabel(spec.id)}`);
  };
  switch (spec.id) {
    case GgufValueType.STRING:
      if (typeof v !== "string") bad();
      sink.string(v as string);
      return;
    case GgufValueType.BOOL:
      if (typeof v !== "boolean") bad();
      sink.u8(v ? 1 : 0);
      return;
    case GgufValueType.FLOAT32:
    case GgufValueType.FLOAT64:
      if (typeof v !== "number") bad();
      sink.float(v as number, spec.id === GgufValueType.FLOAT64 ? 8 : 4);
      return;
    case GgufValueType.UINT64:
    case GgufValueType.INT64: {
      const signed = spec.id === GgufValueType.INT64;
      let b: bigint;
      if (typeof v === "bigint") b = v;
      else if (typeof v === "number" && Number.isSafeInteger(v)) b = BigInt(v);
      else return bad();
      if (signed ? b !== BigInt.asIntN(64, b) : b !== BigInt.asUintN(64, b)) bad();
      sink.big(b, signed);
      return;
    }
    case GgufValueType.ARRAY:
      writeArray(sink, v, spec, what);
      return;
    default: {
      const range = INT_RANGES[spec.id];
      if (!range) throw new GgufError("bad_type", `${what}: unknown metadata type ${spec.id}`);
      if (typeof v !== "number" || !Number.isInteger(v) || v < range[0] || v > range[1]) bad();
      sink.int(v as number, spec.id);
    }
  }
}

function writeArray(sink: Sink, v: GgufWritable, spec: Spec, what: string): void {
  let items: ArrayLike<GgufWritable>;
  let elem: Spec;
  if (isGgufArray(v)) {
    if (spec.elem && spec.elem.id !== v.elementType) {
      throw new GgufError(
        "bad_value",
        `${what}: array of ${typeLabel(v.elementType)} given as ${typeLabel(spec.elem.id)}`,
      );
    }
    items = v.items;
    elem = spec.elem ?? { id: v.elementType };
  } else if (Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView))) {
    items = v as ArrayLike<GgufWritable>;
    elem = spec.elem ?? inferSpec(v, what).elem!;
  } else {
    throw new GgufError("bad_value", `${what}: expected an array`);
  }
  sink.u32(elem.id);
  sink.u64(items.length);
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    // an inner array without a declared element type says its own
    const itemSpec = elem.id === GgufValueType.ARRAY && !elem.elem ? inferSpec(item, what) : elem;
    if (itemSpec.id !== elem.id) throw new GgufError("bad_value", `${what}: item ${i} is not an array`);
    writeValue(sink, item, itemSpec, `${what}[${i}]`);
  }
}

const TYPE_LABELS: Record<GgufValueType, string> = {
  [GgufValueType.UINT8]: "u8",
  [GgufValueType.INT8]: "i8",
  [GgufValueType.UINT16]: "u16",
  [GgufValueType.INT16]: "i16",
  [GgufValueType.UINT32]: "u32",
  [GgufValueType.INT32]: "i32",
  [GgufValueType.FLOAT32]: "f32",
  [GgufValueType.BOOL]: "bool",
  [GgufValueType.STRING]: "string",
  [GgufValueType.ARRAY]: "array",
  [GgufValueType.UINT64]: "u64",
  [GgufValueType.INT64]: "i64",
  [GgufValueType.FLOAT64]: "f64",
};
const typeLabel = (id: GgufValueType): string => TYPE_LABELS[id] ?? `type#${id}`;

/** A growable little-endian byte buffer for the header. */
class Sink {
  private buf = new Uint8Array(4096);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.length + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
  u8(v: number): void {
    this.reserve(1);
    this.buf[this.length++] = v;
  }
  u32(v: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, v, true);
    this.length += 4;
  }
  u64(v: number): void {
    this.big(BigInt(v), false);
  }
  big(v: bigint, signed: boolean): void {
    this.reserve(8);
    if (signed) this.view.setBigInt64(this.length, v, true);
    else this.view.setBigUint64(this.length, v, true);
    this.length += 8;
  }
  int(v: number, id: GgufValueType): void {
    const size = id === GgufValueType.UINT8 || id === GgufValueType.INT8
      ? 1
      : id === GgufValueType.UINT16 || id === GgufValueType.INT16
      ? 2
      : 4;
    this.reserve(size);
    const signed = id === GgufValueType.INT8 || id === GgufValueType.INT16 || id === GgufValueType.INT32;
    if (size === 1) this.buf[this.length] = v & 0xff;
    else if (size === 2) {
      signed ? this.view.setInt16(this.length, v, true) : this.view.setUint16(this.length, v, true);
    } else signed ? this.view.setInt32(this.length, v, true) : this.view.setUint32(this.length, v, true);
    this.length += size;
  }
  float(v: number, size: 4 | 8): void {
    this.reserve(size);
    if (size === 4) this.view.setFloat32(this.length, v, true);
    else this.view.setFloat64(this.length, v, true);
    this.length += size;
  }
  string(s: string): void {
    const b = utf8.encode(s);
    this.u64(b.length);
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }
}
