// Seeded numbers for synthetic weights: only exact IEEE arithmetic (no Math.log/cos), so every
// JS engine draws the same values from the same seed.

/** mulberry32: a 32-bit state PRNG, uniform in [0, 1). */
function mulberry32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a of the tensor name mixed with the seed: each tensor has its own stream, so
 *  tied and untied models (or different layer counts) share the weights they have in common. */
function streamSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ Math.imul(seed | 0, 0x9e3779b1);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

const SQRT3 = 1.7320508075688772;

/** n values of mean + std·z, z ~ Irwin–Hall(4) rescaled to unit variance (bounded, near normal). */
export function gaussian(seed: number, name: string, n: number, std: number, mean: number): Float32Array {
  const rand = mulberry32(streamSeed(seed, name));
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = mean + std * ((rand() + rand() + rand() + rand() - 2) * SQRT3);
  return out;
}
