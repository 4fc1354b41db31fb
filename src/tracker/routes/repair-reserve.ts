// Capacity kept for repairs: a new session takes a slot on every layer, and where that would
// leave fewer free slots than the reserve, the layer's nodes count as full to new sessions (they
// wait in the gateway's queue). Repairs see the nodes as they are and take the reserve.
import type { Candidate } from "./select.ts";

export function reserved(cands: readonly Candidate[], nLayer: number, reserve: number): Candidate[] {
  if (reserve <= 0) return [...cands];
  const free = new Array<number>(nLayer).fill(0);
  for (const c of cands) {
    for (let l = c.range.start; l < Math.min(c.range.end, nLayer); l++) free[l] += c.freeSlots ?? 0;
  }
  const short = (c: Candidate) => {
    for (let l = c.range.start; l < Math.min(c.range.end, nLayer); l++) {
      if (free[l] - 1 < reserve) return true;
    }
    return false;
  };
  return cands.map((c) => short(c) ? { ...c, load: Math.max(c.load, 1) } : c);
}
