// ggml's encodings of f32 values, as its reference code writes them: IEEE half and Q8_0 blocks.

const f32 = new Float32Array(1);
const f32Bits = new Uint32Array(f32.buffer);

/** IEEE half from a float, round to nearest even (as ggml's GGML_FP32_TO_FP16). */
function halfBits(v: number): number {
  f32[0] = v;
  const x = f32Bits[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 112; // rebias 127 → 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1), mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++; // a carry into the exponent is still correct
  return sign | h;
}

export function toF16(values: Float32Array): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  f16Into(values, out);
  return out;
}

/** toF16 into out (values.length · 2 bytes from byte 0). */
export function f16Into(values: Float32Array, out: Uint8Array): void {
  for (let i = 0; i < values.length; i++) {
    const h = halfBits(values[i]);
    out[2 * i] = h & 0xff;
    out[2 * i + 1] = h >>> 8;
  }
}

const ROUNDER = 6755399441055744; // 1.5·2^52: adding and subtracting it rounds to an integer

/** C's roundf for |x| < 2^51: nearest integer, halves away from zero (much faster than Math.round). */
function roundf(x: number): number {
  const r = (x + ROUNDER) - ROUNDER; // nearest, halves to even
  if (Math.abs(r - x) !== 0.5) return r;
  return x < 0 ? -Math.round(-x) : Math.round(x);
}

/** Q8_0 blocks of 32: an f16 scale d = max|x|/127, then 32 int8 round(x/d) (ggml's reference quantizer). */
export function toQ8_0(values: Float32Array): Uint8Array {
  const out = new Uint8Array((values.length / 32) * 34);
  q8_0Into(values, out);
  return out;
}

/** toQ8_0 into out (values.length / 32 · 34 bytes from byte 0). */
export function q8_0Into(values: Float32Array, out: Uint8Array): void {
  const nBlocks = values.length / 32;
  const q = new Int8Array(out.buffer, out.byteOffset, out.byteLength);
  for (let b = 0; b < nBlocks; b++) {
    const v0 = b * 32;
    let amax = 0;
    for (let j = 0; j < 32; j++) {
      const a = Math.abs(values[v0 + j]);
      if (a > amax) amax = a;
    }
    const d = amax / 127;
    const id = d ? 1 / d : 0;
    const h = halfBits(d), o = b * 34;
    out[o] = h & 0xff;
    out[o + 1] = h >>> 8;
    for (let j = 0; j < 32; j++) q[o + 2 + j] = roundf(values[v0 + j] * id);
  }
}

/** Q4_0 blocks of 32: an f16 scale d = -max/8 (max: the value of largest magnitude), then 16 bytes
 *  of 4-bit min(15, trunc(x/d + 8.5)), value j in the low nibble of byte j and value j+16 in its
 *  high nibble (ggml's reference quantizer). */
export function toQ4_0(values: Float32Array): Uint8Array {
  const out = new Uint8Array((values.length / 32) * 18);
  q4_0Into(values, out);
  return out;
}

/** toQ4_0 into out (values.length / 32 · 18 bytes from byte 0). */
export function q4_0Into(values: Float32Array, out: Uint8Array): void {
  const nBlocks = values.length / 32;
  for (let b = 0; b < nBlocks; b++) {
    const v0 = b * 32;
    let amax = 0, max = 0;
    for (let j = 0; j < 32; j++) {
      const v = values[v0 + j], a = Math.abs(v);
      if (a > amax) {
        amax = a;
        max = v;
      }
    }
    const d = Math.fround(max / -8);
    const id = d ? Math.fround(1 / d) : 0;
    const h = halfBits(d), o = b * 18;
    out[o] = h & 0xff;
    out[o + 1] = h >>> 8;
    for (let j = 0; j < 16; j++) {
      // x/d + 8.5 lies in [0.5, 16.5]: | 0 truncates it as C's (int8_t) cast does
      const lo = Math.min(15, (Math.fround(values[v0 + j] * id) + 8.5) | 0);
      const hi = Math.min(15, (Math.fround(values[v0 + 16 + j] * id) + 8.5) | 0);
      out[o + 2 + j] = lo | (hi << 4);
    }
  }
}
