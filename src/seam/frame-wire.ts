// The wire form of the frames a route sends every step (prefill chunks, decode tokens and their
// replies), written and read field by field. protobuf-es's codec is general: its per-field
// closures cost 16-19 µs a frame (37 in a route) on a node whose caches the other shard's compute has just
// cooled (docs/seams.md). The bytes are protobuf's, and the same as protobuf-es writes: a frame
// this file does not cover (an OPEN or a refusal, unknown fields, a non-ASCII string, a value out
// of its field's range, anything malformed) goes through protobuf-es, which then writes it or
// says what is wrong with it. frame-wire.test.ts holds both ways equal.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  type LayerRange,
  type NodeTelemetry,
  type Positions,
  type Sampled,
  type SeamFrame,
  SeamFrameSchema,
  type Tensor,
} from "../gen/strata/seam/v1/seam_pb.ts";

const VARINT = 0, I64 = 1, LEN = 2, I32 = 5;
const FLOAT32_MAX = 3.4028234663852886e38;
const EMPTY = new Uint8Array(0);
/** the scratch buffer's size, and the most it keeps between frames */
const ROOM = 64 << 10, KEPT_ROOM = 4 << 20;
/** longer strings are protobuf-es's to read (a step's are ids of a few dozen bytes) */
const SHORT_STRING = 256;
/** thrown inside on what protobuf-es must write or read instead; never leaves this file */
const ASIDE = Symbol("frame-wire: set aside for protobuf-es");

/** A frame's protobuf bytes (the same as `toBinary(SeamFrameSchema, frame)`). */
export function frameToBinary(frame: SeamFrame): Uint8Array {
  const w = writer;
  w.at = 0;
  try {
    writeFrame(w, frame);
  } catch (e) {
    if (e !== ASIDE) throw e;
    return toBinary(SeamFrameSchema, frame);
  }
  const bytes = w.buf.slice(0, w.at);
  // a big prefill chunk's room is not kept for the decode steps after it
  if (w.buf.length > KEPT_ROOM) w.shrink();
  return bytes;
}

/** A frame from protobuf bytes (equal to `fromBinary(SeamFrameSchema, bytes)`; throws as it does). */
export function frameFromBinary(bytes: Uint8Array): SeamFrame {
  try {
    return readFrame(new Reader(bytes));
  } catch (e) {
    if (e !== ASIDE) throw e;
    return fromBinary(SeamFrameSchema, bytes);
  }
}

// ---- writing, into one scratch buffer (a frame leaves as a copy of its bytes) ----

const isU32 = (v: number) => v >>> 0 === v;
const u32Size = (v: number) => (v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5);

class Writer {
  buf = new Uint8Array(ROOM);
  #view = new DataView(this.buf.buffer);
  at = 0;
  shrink(): void {
    this.buf = new Uint8Array(ROOM);
    this.#view = new DataView(this.buf.buffer);
  }
  /** room for n more bytes */
  room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const grown = new Uint8Array(Math.max(2 * this.buf.length, this.at + n));
    grown.set(this.buf.subarray(0, this.at));
    this.buf = grown;
    this.#view = new DataView(grown.buffer);
  }
  u32(v: number): void {
    if (!isU32(v)) throw ASIDE;
    this.room(5);
    while (v > 0x7f) {
      this.buf[this.at++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[this.at++] = v;
  }
  /** a negative int32 is ten bytes, sign-extended */
  i32(v: number): void {
    if ((v | 0) !== v) throw ASIDE;
    if (v >= 0) return this.u32(v);
    this.room(10);
    for (let i = 0; i < 9; i++) {
      this.buf[this.at++] = (v & 0x7f) | 0x80;
      v >>= 7;
    }
    this.buf[this.at++] = 1;
  }
  u64(v: bigint): void {
    if (typeof v !== "bigint" || v < 0n || v >= 1n << 64n) throw ASIDE;
    this.room(10);
    while (v > 0x7fn) {
      this.buf[this.at++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.at++] = Number(v);
  }
  tag(no: number, wire: number): void {
    this.u32((no << 3) | wire);
  }
  f32(v: number): void {
    // protobuf-es refuses a finite number beyond float32's range
    if (typeof v !== "number" || Math.abs(v) > FLOAT32_MAX && Number.isFinite(v)) throw ASIDE;
    this.room(4);
    this.#view.setFloat32(this.at, v, true);
    this.at += 4;
  }
  f64(v: number): void {
    if (typeof v !== "number") throw ASIDE;
    this.room(8);
    this.#view.setFloat64(this.at, v, true);
    this.at += 8;
  }
  fixed32(v: number): void {
    if (!isU32(v)) throw ASIDE;
    this.room(4);
    this.#view.setUint32(this.at, v, true);
    this.at += 4;
  }
  /** ASCII only: other strings are protobuf-es's to encode */
  ascii(s: string): void {
    if (typeof s !== "string") throw ASIDE;
    this.u32(s.length);
    this.room(s.length);
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c > 0x7f) throw ASIDE;
      this.buf[this.at++] = c;
    }
  }
  bytes(b: Uint8Array): void {
    this.u32(b.length);
    this.room(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }
  packed(xs: readonly number[]): void {
    let n = 0;
    for (const x of xs) n += isU32(x) ? u32Size(x) : NaN;
    if (Number.isNaN(n)) throw ASIDE;
    this.u32(n);
    for (const x of xs) this.u32(x);
  }
  /** opens a field of a message whose size is known once it is written: one byte kept for it */
  open(no: number): number {
    this.tag(no, LEN);
    this.room(1);
    return this.at++;
  }
  /** closes it: a body of 128 bytes or more moves over for its longer length */
  close(mark: number): void {
    const n = this.at - mark - 1;
    const extra = u32Size(n) - 1;
    if (extra) {
      this.room(extra);
      this.buf.copyWithin(mark + 1 + extra, mark + 1, this.at);
      this.at += extra;
    }
    const end = this.at;
    this.at = mark;
    this.u32(n);
    this.at = end;
  }
}

const writer = new Writer();

function putU32(w: Writer, no: number, v: number): void {
  if (v !== 0) (w.tag(no, VARINT), w.u32(v));
}
/** enums are int32 on the wire; no enum of this schema is negative */
const putEnum = putU32;
function putF32(w: Writer, no: number, v: number): void {
  if (!Object.is(v, 0)) (w.tag(no, I32), w.f32(v));
}
function putF64(w: Writer, no: number, v: number): void {
  if (!Object.is(v, 0)) (w.tag(no, I64), w.f64(v));
}
function putStr(w: Writer, no: number, s: string): void {
  if (s !== "") (w.tag(no, LEN), w.ascii(s));
}
function putBytes(w: Writer, no: number, b: Uint8Array): void {
  if (!(b instanceof Uint8Array)) throw ASIDE;
  if (b.length) (w.tag(no, LEN), w.bytes(b));
}
function putU64(w: Writer, no: number, v: bigint): void {
  if (v !== 0n) (w.tag(no, VARINT), w.u64(v));
}
function putPacked(w: Writer, no: number, xs: readonly number[]): void {
  if (xs.length) (w.tag(no, LEN), w.packed(xs));
}
function putRange(w: Writer, no: number, r: LayerRange | undefined): void {
  if (!r) return;
  if (r.$unknown) throw ASIDE;
  const m = w.open(no);
  putU32(w, 1, r.start);
  putU32(w, 2, r.end);
  w.close(m);
}

function writeFrame(w: Writer, f: SeamFrame): void {
  // OPEN, status and prefix blocks, and fields kept from a newer schema: protobuf-es writes those
  if (
    f.open !== undefined || f.status !== undefined || f.keep !== undefined || f.snapshot !== undefined ||
    f.$unknown
  ) throw ASIDE;
  putU32(w, 1, f.schemaVersion);
  putStr(w, 2, f.workId);
  putStr(w, 3, f.sessionId);
  putU64(w, 4, f.routeEpoch);
  putBytes(w, 5, f.artifactSha256);
  putBytes(w, 6, f.recipeFingerprint);
  putRange(w, 7, f.range);
  putEnum(w, 8, f.phase);
  if (f.positions) {
    if (f.positions.$unknown) throw ASIDE;
    const m = w.open(9);
    putU32(w, 1, f.positions.start);
    putU32(w, 2, f.positions.count);
    w.close(m);
  }
  putU64(w, 10, f.stepId);
  putU32(w, 11, f.cacheExpect);
  putU32(w, 12, f.cacheResult);
  putU32(w, 13, f.chunkIndex);
  putU32(w, 14, f.chunkCount);
  for (const t of f.tensors) writeTensor(w, t);
  for (const t of f.telemetry) writeTelemetry(w, t);
  if (f.sampled) {
    // logprobs are rare: protobuf-es writes those frames
    if (f.sampled.$unknown || f.sampled.logprob !== 0 || f.sampled.top.length) throw ASIDE;
    const m = w.open(19);
    if (f.sampled.token !== 0) (w.tag(1, VARINT), w.i32(f.sampled.token));
    putF32(w, 2, f.sampled.margin);
    w.close(m);
  }
  if (f.rebuild) (w.tag(20, VARINT), w.u32(1));
  putPacked(w, 21, f.hopPositions);
  putU32(w, 22, f.crossings);
  putPacked(w, 25, f.hopReused);
}

function writeTensor(w: Writer, t: Tensor): void {
  if (t.$unknown) throw ASIDE;
  const m = w.open(15);
  putStr(w, 1, t.name);
  putPacked(w, 2, t.shape);
  putEnum(w, 3, t.elementType);
  putEnum(w, 4, t.byteOrder);
  putEnum(w, 5, t.compression);
  putBytes(w, 6, t.data);
  putBytes(w, 7, t.rowScales);
  if (t.crc32c !== 0) (w.tag(8, I32), w.fixed32(t.crc32c));
  w.close(m);
}

function writeTelemetry(w: Writer, t: NodeTelemetry): void {
  if (t.$unknown) throw ASIDE;
  const m = w.open(18);
  putStr(w, 1, t.node);
  putRange(w, 2, t.range);
  putF32(w, 3, t.queueMs);
  putF32(w, 4, t.computeMs);
  putU32(w, 5, t.batchSessions);
  putU32(w, 6, t.batchTokens);
  putU32(w, 7, t.bytesIn);
  putU32(w, 8, t.bytesOut);
  putF32(w, 9, t.sampleMs);
  putStr(w, 10, t.transport);
  putF32(w, 11, t.codecMs);
  putF64(w, 12, t.receivedUnixMs);
  putF64(w, 13, t.sentUnixMs);
  putU32(w, 14, t.batchPasses);
  w.close(m);
}

// ---- reading: anything unusual is set aside for protobuf-es ----

class Reader {
  at = 0;
  /** where the message being read ends */
  end: number;
  readonly #view: DataView;
  constructor(readonly buf: Uint8Array) {
    this.end = buf.length;
    this.#view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  /** a varint's low 32 bits (it may run to ten bytes, as a negative int32's does) */
  varint(): number {
    let v = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.at >= this.end) throw ASIDE;
      const b = this.buf[this.at++];
      if (shift < 32) v |= (b & 0x7f) << shift;
      if (b < 0x80) return v;
    }
    throw ASIDE;
  }
  u64(): bigint {
    let v = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.at >= this.end) throw ASIDE;
      const b = this.buf[this.at++];
      v |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return BigInt.asUintN(64, v);
    }
    throw ASIDE;
  }
  /** the end of a length-delimited field that starts here */
  sub(): number {
    const n = this.varint() >>> 0;
    if (n > this.end - this.at) throw ASIDE;
    return this.at + n;
  }
  bytes(): Uint8Array {
    const end = this.sub();
    const b = this.buf.subarray(this.at, end);
    this.at = end;
    return b;
  }
  ascii(): string {
    const end = this.sub();
    if (end - this.at > SHORT_STRING) throw ASIDE;
    let s = "";
    for (let i = this.at; i < end; i++) {
      const c = this.buf[i];
      if (c > 0x7f) throw ASIDE;
      s += String.fromCharCode(c);
    }
    this.at = end;
    return s;
  }
  f32(): number {
    if (this.end - this.at < 4) throw ASIDE;
    const v = this.#view.getFloat32(this.at, true);
    this.at += 4;
    return v;
  }
  f64(): number {
    if (this.end - this.at < 8) throw ASIDE;
    const v = this.#view.getFloat64(this.at, true);
    this.at += 8;
    return v;
  }
  fixed32(): number {
    if (this.end - this.at < 4) throw ASIDE;
    const v = this.#view.getUint32(this.at, true);
    this.at += 4;
    return v;
  }
  packed(): number[] {
    const end = this.sub();
    const out: number[] = [];
    while (this.at < end) out.push(this.varint() >>> 0);
    if (this.at !== end) throw ASIDE;
    return out;
  }
}

/** Reads fields up to `end`, handing each (number, wire type) to `field`. */
function fields(r: Reader, end: number, field: (no: number, wire: number) => void): void {
  const outer = r.end;
  r.end = end;
  while (r.at < end) {
    const tag = r.varint() >>> 0;
    field(tag >>> 3, tag & 7);
  }
  r.end = outer;
  if (r.at !== end) throw ASIDE;
}

function wire(got: number, want: number): void {
  if (got !== want) throw ASIDE;
}

function readRange(r: Reader): LayerRange {
  const m: LayerRange = { $typeName: "strata.seam.v1.LayerRange", start: 0, end: 0 };
  fields(r, r.sub(), (no, w) => {
    wire(w, VARINT);
    if (no === 1) m.start = r.varint() >>> 0;
    else if (no === 2) m.end = r.varint() >>> 0;
    else throw ASIDE;
  });
  return m;
}

function readPositions(r: Reader): Positions {
  const m: Positions = { $typeName: "strata.seam.v1.Positions", start: 0, count: 0 };
  fields(r, r.sub(), (no, w) => {
    wire(w, VARINT);
    if (no === 1) m.start = r.varint() >>> 0;
    else if (no === 2) m.count = r.varint() >>> 0;
    else throw ASIDE;
  });
  return m;
}

function readTensor(r: Reader): Tensor {
  const m: Tensor = {
    $typeName: "strata.seam.v1.Tensor",
    name: "",
    shape: [],
    elementType: 0,
    byteOrder: 0,
    compression: 0,
    data: EMPTY,
    rowScales: EMPTY,
    crc32c: 0,
  };
  fields(r, r.sub(), (no, w) => {
    switch (no) {
      case 1:
        return (wire(w, LEN), (m.name = r.ascii()));
      case 2:
        // a writer may send the shape unpacked: protobuf-es reads that one
        return (wire(w, LEN), m.shape.push(...r.packed()));
      case 3:
        return (wire(w, VARINT), (m.elementType = r.varint()));
      case 4:
        return (wire(w, VARINT), (m.byteOrder = r.varint()));
      case 5:
        return (wire(w, VARINT), (m.compression = r.varint()));
      case 6:
        return (wire(w, LEN), (m.data = r.bytes()));
      case 7:
        return (wire(w, LEN), (m.rowScales = r.bytes()));
      case 8:
        return (wire(w, I32), (m.crc32c = r.fixed32()));
      default:
        throw ASIDE;
    }
  });
  return m;
}

function readTelemetry(r: Reader): NodeTelemetry {
  const m: NodeTelemetry = {
    $typeName: "strata.seam.v1.NodeTelemetry",
    node: "",
    queueMs: 0,
    computeMs: 0,
    batchSessions: 0,
    batchTokens: 0,
    bytesIn: 0,
    bytesOut: 0,
    sampleMs: 0,
    transport: "",
    codecMs: 0,
    receivedUnixMs: 0,
    sentUnixMs: 0,
    batchPasses: 0,
  };
  fields(r, r.sub(), (no, w) => {
    switch (no) {
      case 1:
        return (wire(w, LEN), (m.node = r.ascii()));
      case 2:
        if (m.range) throw ASIDE; // a repeated message field merges: protobuf-es's business
        return (wire(w, LEN), (m.range = readRange(r)));
      case 3:
        return (wire(w, I32), (m.queueMs = r.f32()));
      case 4:
        return (wire(w, I32), (m.computeMs = r.f32()));
      case 5:
        return (wire(w, VARINT), (m.batchSessions = r.varint() >>> 0));
      case 6:
        return (wire(w, VARINT), (m.batchTokens = r.varint() >>> 0));
      case 7:
        return (wire(w, VARINT), (m.bytesIn = r.varint() >>> 0));
      case 8:
        return (wire(w, VARINT), (m.bytesOut = r.varint() >>> 0));
      case 9:
        return (wire(w, I32), (m.sampleMs = r.f32()));
      case 10:
        return (wire(w, LEN), (m.transport = r.ascii()));
      case 11:
        return (wire(w, I32), (m.codecMs = r.f32()));
      case 12:
        return (wire(w, I64), (m.receivedUnixMs = r.f64()));
      case 13:
        return (wire(w, I64), (m.sentUnixMs = r.f64()));
      case 14:
        return (wire(w, VARINT), (m.batchPasses = r.varint() >>> 0));
      default:
        throw ASIDE;
    }
  });
  return m;
}

function readSampled(r: Reader): Sampled {
  const m: Sampled = { $typeName: "strata.seam.v1.Sampled", token: 0, margin: 0, logprob: 0, top: [] };
  fields(r, r.sub(), (no, w) => {
    if (no === 1) (wire(w, VARINT), (m.token = r.varint() | 0));
    else if (no === 2) (wire(w, I32), (m.margin = r.f32()));
    else throw ASIDE;
  });
  return m;
}

function readFrame(r: Reader): SeamFrame {
  const m: SeamFrame = {
    $typeName: "strata.seam.v1.SeamFrame",
    schemaVersion: 0,
    workId: "",
    sessionId: "",
    routeEpoch: 0n,
    artifactSha256: EMPTY,
    recipeFingerprint: EMPTY,
    phase: 0,
    stepId: 0n,
    cacheExpect: 0,
    cacheResult: 0,
    chunkIndex: 0,
    chunkCount: 0,
    tensors: [],
    telemetry: [],
    rebuild: false,
    hopPositions: [],
    crossings: 0,
    hopReused: [],
  };
  fields(r, r.end, (no, w) => {
    switch (no) {
      case 1:
        return (wire(w, VARINT), (m.schemaVersion = r.varint() >>> 0));
      case 2:
        return (wire(w, LEN), (m.workId = r.ascii()));
      case 3:
        return (wire(w, LEN), (m.sessionId = r.ascii()));
      case 4:
        return (wire(w, VARINT), (m.routeEpoch = r.u64()));
      case 5:
        return (wire(w, LEN), (m.artifactSha256 = r.bytes()));
      case 6:
        return (wire(w, LEN), (m.recipeFingerprint = r.bytes()));
      case 7:
        if (m.range) throw ASIDE;
        return (wire(w, LEN), (m.range = readRange(r)));
      case 8:
        return (wire(w, VARINT), (m.phase = r.varint()));
      case 9:
        if (m.positions) throw ASIDE;
        return (wire(w, LEN), (m.positions = readPositions(r)));
      case 10:
        return (wire(w, VARINT), (m.stepId = r.u64()));
      case 11:
        return (wire(w, VARINT), (m.cacheExpect = r.varint() >>> 0));
      case 12:
        return (wire(w, VARINT), (m.cacheResult = r.varint() >>> 0));
      case 13:
        return (wire(w, VARINT), (m.chunkIndex = r.varint() >>> 0));
      case 14:
        return (wire(w, VARINT), (m.chunkCount = r.varint() >>> 0));
      case 15:
        return (wire(w, LEN), m.tensors.push(readTensor(r)));
      case 18:
        return (wire(w, LEN), m.telemetry.push(readTelemetry(r)));
      case 19:
        if (m.sampled) throw ASIDE;
        return (wire(w, LEN), (m.sampled = readSampled(r)));
      case 20:
        return (wire(w, VARINT), (m.rebuild = r.u64() !== 0n));
      case 21:
        return (wire(w, LEN), m.hopPositions.push(...r.packed()));
      case 22:
        return (wire(w, VARINT), (m.crossings = r.varint() >>> 0));
      case 25:
        return (wire(w, LEN), m.hopReused.push(...r.packed()));
      default:
        // OPEN, status and prefix blocks, and fields this schema does not know
        throw ASIDE;
    }
  });
  return m;
}
