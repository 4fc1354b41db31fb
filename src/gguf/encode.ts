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
  const view = new DataView(out.buffer);
  for (let i = 0; i < values.length; i++) view.setUint16(i * 2, halfBits(values[i]), true);
  return out;
}

/** Q8_0 blocks of 32: an f16 scale d = max|x|/127, then 32 int8 round(x/d) (ggml's reference quantizer). */
export function toQ8_0(values: Float32Array): Uint8Array {
  const nBlocks = values.length / 32;
  const out = new Uint8Array(nBlocks * 34);
  const view = new DataView(out.buffer);
  for (let b = 0; b < nBlocks; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(values[b * 32 + j]));
    const d = amax / 127;
    const id = d ? 1 / d : 0;
    view.setUint16(b * 34, halfBits(d), true);
    for (let j = 0; j < 32; j++) {
      const x = values[b * 32 + j] * id;
      view.setInt8(b * 34 + 2 + j, Math.sign(x) * Math.round(Math.abs(x))); // roundf: halves away from zero
    }
  }
  return out;
}
