// Which layer range a new volunteer should host: of the network's ranges, the one the
// fewest live nodes serve (ties: the first), among those its engine's memory can hold.
import type { LayerRange } from "../../engine/layer-range.ts";
import { memoryMisfit, type RangeMemory } from "../../engine/memory-cap.ts";

export interface HostedRange {
  readonly range: { readonly start: number; readonly end: number };
  readonly live: boolean;
}

export type Assignment =
  | { readonly ok: true; readonly range: LayerRange; readonly memory: RangeMemory; readonly hosts: number }
  | { readonly ok: false; readonly why: string };

export function assignRange(
  candidates: readonly LayerRange[],
  hosted: readonly HostedRange[],
  memoryOf: (r: LayerRange) => RangeMemory,
  capBytes: number,
): Assignment {
  const hosts = (r: LayerRange) =>
    hosted.filter((h) => h.live && h.range.start === r.start && h.range.end === r.end).length;
  const fitting = candidates.filter((r) => !memoryMisfit(memoryOf(r), capBytes));
  if (!fitting.length) {
    const r = candidates[0];
    return {
      ok: false,
      why: `no range fits this engine: layers ${r.start}:${r.end} ${memoryMisfit(memoryOf(r), capBytes)}`,
    };
  }
  let best = fitting[0];
  for (const r of fitting) if (hosts(r) < hosts(best)) best = r;
  return { ok: true, range: best, memory: memoryOf(best), hosts: hosts(best) };
}
