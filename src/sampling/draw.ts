// A uniform draw in [0, 1) from (seed, position) alone: the token at a position gets the
// same draw whether its session ran alone or batched with others, and after a retry.
const MASK = (1n << 64n) - 1n;

function splitmix64(x: bigint): bigint {
  let z = (x + 0x9e3779b97f4a7c15n) & MASK;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
  return z ^ (z >> 31n);
}

export function uniformAt(seed: bigint, position: number): number {
  const bits = splitmix64((seed & MASK) ^ splitmix64(BigInt(position)));
  // the top 53 bits as a double in [0, 1)
  return Number(bits >> 11n) / 2 ** 53;
}
