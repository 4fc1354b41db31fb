// What hosting a layer range takes in memory: its weights (from the manifest) plus a full
// KV pool. The tracker checks adverts with it and the volunteer assignment offers by it.
import { type RangeMemory, rangeMemory } from "../engine/memory-fit.ts";
import { type Manifest, shardBytes } from "../gguf/manifest.ts";

/** The model facts the estimate needs. */
export interface RangeModel {
  readonly manifest: Manifest;
  /** K (or V) row width: n_embd × head_count_kv / head_count */
  readonly nEmbdKv: number;
}

export function rangeMemoryOf(
  model: RangeModel,
  range: { readonly start: number; readonly end: number },
  kvCells: number,
): RangeMemory {
  return rangeMemory({
    weightBytes: shardBytes(model.manifest, range.start, range.end).bytes,
    layers: range.end - range.start,
    kvCells,
    nEmbdKv: model.nEmbdKv,
  });
}
