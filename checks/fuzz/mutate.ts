// Inputs for the fuzzer: valid seeds, changed a few places at a time. Byte-level changes (bit
// flips, boundary bytes, inserts, deletes, repeats, cuts, splices with another seed) and
// protobuf-aware ones: the wire format is walked and a varint (a length, a count, a size, a
// tag) is replaced by a boundary value, so a frame stays parseable while it lies about sizes;
// in other formats (GGUF) a little-endian u32 or u64 is.
// The stream is seeded: input i of a target and seed is the same on every run.
import { xorshift32 } from "../../src/model/seeded.ts";

/** The inputs' draws: xorshift32, small, fast and the same everywhere. */
export const prng = xorshift32;

const BOUNDARY_BYTES = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff];
const BOUNDARY_VARINTS = [
  0n,
  1n,
  0x7fn,
  0x80n,
  0xffffn,
  0x7fffffffn,
  0x80000000n,
  0xffffffffn,
  0x100000000n,
  0x7fffffffffffffffn,
  0xffffffffffffffffn,
];

export function encodeVarint(v: bigint): number[] {
  const out: number[] = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return out;
}

/** Where each varint of a protobuf message starts and ends (descending into sub-messages). */
export function varintSpans(bytes: Uint8Array, from = 0, to = bytes.length, depth = 0): [number, number][] {
  const spans: [number, number][] = [];
  let p = from;
  const varint = (): [bigint, number] | undefined => {
    let v = 0n, shift = 0n;
    const start = p;
    while (p < to && p - start < 10) {
      const b = bytes[p++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return [v, start];
      shift += 7n;
    }
    return undefined;
  };
  while (p < to) {
    const tag = varint();
    if (!tag) break;
    spans.push([tag[1], p]);
    const wire = Number(tag[0] & 7n);
    if (wire === 0) {
      const v = varint();
      if (!v) break;
      spans.push([v[1], p]);
    } else if (wire === 1) p += 8;
    else if (wire === 5) p += 4;
    else if (wire === 2) {
      const len = varint();
      if (!len) break;
      spans.push([len[1], p]);
      const end = p + Number(len[0]);
      if (end > to) break;
      // a length-delimited field may be a message: its varints too (not if it does not parse)
      if (depth < 4) spans.push(...varintSpans(bytes, p, end, depth + 1));
      p = end;
    } else break;
  }
  return spans;
}

/** One changed copy of `seed`: 1 to 4 changes, each picked at random. */
export function mutate(seed: Uint8Array, others: readonly Uint8Array[], next: () => number, proto: boolean) {
  let b = Array.from(seed);
  const pick = (n: number) => n > 0 ? next() % n : 0;
  const changes = 1 + pick(4);
  for (let c = 0; c < changes; c++) {
    // protobuf: varints set to boundary values; other formats (GGUF): fixed-width integers
    const op = pick(9);
    const at = pick(b.length + 1);
    switch (op) {
      case 0: // a bit flipped
        if (b.length) {
          const i = pick(b.length);
          b[i] ^= 1 << pick(8);
        }
        break;
      case 1: // a boundary byte
        if (b.length) b[pick(b.length)] = BOUNDARY_BYTES[pick(BOUNDARY_BYTES.length)];
        break;
      case 2: // random bytes in
        b.splice(at, 0, ...Array.from({ length: 1 + pick(16) }, () => pick(256)));
        break;
      case 3: // a run deleted
        b.splice(at, 1 + pick(Math.max(1, b.length >> 3)));
        break;
      case 4: { // a run repeated
        const len = 1 + pick(Math.min(64, Math.max(1, b.length - at)));
        b.splice(at, 0, ...b.slice(at, at + len));
        break;
      }
      case 5: // cut short
        b = b.slice(0, pick(b.length + 1));
        break;
      case 6: { // spliced with another seed
        const o = others[pick(others.length)];
        if (o) b = [...b.slice(0, at), ...o.slice(pick(o.length + 1))];
        break;
      }
      case 7:
      case 8:
        if (!proto) { // a little-endian u32 or u64 (a count, a size, an offset) set to a boundary value
          const width = op === 7 ? 4 : 8;
          if (b.length < width) break;
          const i = pick(b.length - width + 1);
          const v = BOUNDARY_VARINTS[pick(BOUNDARY_VARINTS.length)];
          for (let k = 0; k < width; k++) b[i + k] = Number((v >> BigInt(8 * k)) & 0xffn);
          break;
        }
      // falls through
      default: { // a varint (tag, length, count, size) set to a boundary value
        const spans = varintSpans(Uint8Array.from(b));
        if (spans.length === 0) break;
        const [s, e] = spans[pick(spans.length)];
        b.splice(s, e - s, ...encodeVarint(BOUNDARY_VARINTS[pick(BOUNDARY_VARINTS.length)]));
      }
    }
  }
  return Uint8Array.from(b);
}
