import { xorshift32 } from "./seeded.ts";
// How `strata model certify` walks a model it may not hold whole: contiguous ranges, each
// as long as the memory cap allows, loaded one at a time.

/** Ranges covering [0, nLayer), each the longest whose `need` (bytes) fits under `capBytes`. */
export function certifyRanges(
  nLayer: number,
  need: (range: { start: number; end: number }) => number,
  capBytes: number,
): Array<{ start: number; end: number }> {
  const out: Array<{ start: number; end: number }> = [];
  for (let start = 0; start < nLayer;) {
    let end = start;
    while (end < nLayer && need({ start, end: end + 1 }) <= capBytes) end++;
    if (end === start) {
      const mib = (need({ start, end: start + 1 }) / 2 ** 20).toFixed(1);
      throw new Error(
        `layer ${start} alone needs ${mib} MiB, more than the ${(capBytes / 2 ** 20).toFixed(1)} MiB cap`,
      );
    }
    out.push({ start, end });
    start = end;
  }
  return out;
}

/** Probe prompts: `count` seeded token sequences over the ordinary part of the vocabulary. */
export function probePrompts(nVocab: number, count: number, tokens: number, seed: number): Int32Array[] {
  // fixed, portable, enough to spread tokens
  const next = xorshift32(seed);
  // skip the first ids (controls and bytes in most vocabularies) when the vocabulary allows
  const low = nVocab > 1024 ? 256 : 0;
  return Array.from(
    { length: count },
    () => Int32Array.from({ length: tokens }, () => low + next() % (nVocab - low)),
  );
}
