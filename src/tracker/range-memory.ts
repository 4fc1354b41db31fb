// What hosting a layer range takes in memory: its weights (from the manifest), its KV pool
// and, given the engine's settings, its compute buffers. The tracker checks adverts with it
// and the volunteer assignment offers by it.
import { type EngineBudget, type RangeMemory, type RangeModel, shardMemory } from "../engine/memory-fit.ts";

/** The model facts the estimate needs. */
export type { RangeModel };

/** Without the engine's settings only weights and KV (one stream) are counted. */
export function rangeMemoryOf(
  model: RangeModel,
  range: { readonly start: number; readonly end: number },
  kvCells: number,
  engine?: Omit<EngineBudget, "kvCells">,
): RangeMemory {
  return shardMemory(model, range, kvCells, engine);
}
