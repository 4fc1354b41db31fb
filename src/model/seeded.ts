// Seeded numbers for synthetic weights: only exact IEEE arithmetic (no Math.log/cos), so every
// JS engine draws the same values from the same seed.

/** FNV-1a of the tensor name mixed with the seed: each tensor has its own stream, so
 *  tied and untied models (or different layer counts) share the weights they have in common. */
function streamSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ Math.imul(seed | 0, 0x9e3779b1);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

const SQRT3 = 1.7320508075688772;
const TWO_POW_M32 = 1 / 4294967296;
const MULBERRY_STEP = 0x6d2b79f5;

// a sum of four uniform bytes has mean 510 and variance 4·(256² − 1)/12
const BYTES_SCALE = 1 / Math.sqrt((4 * (256 * 256 - 1)) / 12);

/**
 * One tensor's stream of near-normal values, drawn in pieces of any length from mulberry32 (a
 * 32-bit counter PRNG). With 4 draws a value is Irwin–Hall(4) of four uniforms in [0, 1); with 1
 * draw (four times cheaper, for large models) the sum of one draw's four bytes; either rescaled to
 * unit variance (bounded at ±3.46, near normal). The state is a counter, so seek() jumps to any
 * value at no cost.
 */
export class GaussianStream {
  #start: number;
  #s: number;
  readonly #draws: 1 | 4;

  constructor(seed: number, name: string, draws: 1 | 4 = 4) {
    this.#start = streamSeed(seed, name);
    this.#s = this.#start;
    this.#draws = draws;
  }

  /** Continue at value index i of the stream. */
  seek(i: number): void {
    // (start + draws·i·step) mod 2^32, exact for any safe integer i
    const lo = i % 0x40000000, hi = Math.floor(i / 0x40000000); // i = hi·2^30 + lo
    const step = Math.imul(this.#draws, MULBERRY_STEP);
    this.#s = (this.#start + Math.imul(lo, step) + Math.imul(Math.imul(hi, 0x40000000), step)) | 0;
  }

  /** Fills out[from, to) with mean + std·z, the stream's next values. */
  fill(out: Float32Array, std: number, mean: number, from = 0, to = out.length): void {
    if (this.#draws === 1) return this.#fillBytes(out, std, mean, from, to);
    let s = this.#s;
    for (let i = from; i < to; i++) {
      let sum = 0;
      for (let k = 0; k < 4; k++) {
        s = (s + MULBERRY_STEP) | 0;
        let t = s;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        sum += (t ^ (t >>> 14)) >>> 0;
      }
      // sum·2^-32 is exactly the sum of the four uniforms
      out[i] = mean + std * ((sum * TWO_POW_M32 - 2) * SQRT3);
    }
    this.#s = s;
  }

  #fillBytes(out: Float32Array, std: number, mean: number, from: number, to: number): void {
    let s = this.#s;
    const k = std * BYTES_SCALE;
    for (let i = from; i < to; i++) {
      s = (s + MULBERRY_STEP) | 0;
      let t = s;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      t ^= t >>> 14;
      const sum = (t & 0xff) + ((t >>> 8) & 0xff) + ((t >>> 16) & 0xff) + (t >>> 24);
      out[i] = mean + k * (sum - 510);
    }
    this.#s = s;
  }
}

/** n values of mean + std·z from the tensor's stream (GaussianStream from its start). */
export function gaussian(seed: number, name: string, n: number, std: number, mean: number): Float32Array {
  const out = new Float32Array(n);
  new GaussianStream(seed, name).fill(out, std, mean);
  return out;
}

/** xorshift32 from `seed` (0 taken as 1): fixed, portable, 32-bit draws for what needs only a
 *  spread (probe prompts, a simulated network), not the weights' streams. */
export function xorshift32(seed: number): () => number {
  let s = (seed >>> 0) || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}
