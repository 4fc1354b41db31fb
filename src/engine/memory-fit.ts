// Whether a layer range fits an engine's memory: weights plus a full KV pool, decided
// from the model's header before anything is loaded (the tracker checks every advert; a
// volunteer page checks before it downloads).

export interface RangeMemory {
  readonly weightBytes: number;
  readonly kvBytes: number;
  readonly total: number;
}

/** K and V in f16 for every layer of the range and every cell of the pool. */
export function rangeMemory(o: {
  weightBytes: number;
  layers: number;
  kvCells: number;
  nEmbdKv: number;
}): RangeMemory {
  const kvBytes = 2 * o.layers * o.kvCells * o.nEmbdKv * 2;
  return { weightBytes: o.weightBytes, kvBytes, total: o.weightBytes + kvBytes };
}

const gib = (n: number) => `${(n / 2 ** 30).toFixed(2)} GiB`;

/** Why the range does not fit under the cap (0 = no cap), or undefined when it does. */
export function memoryMisfit(need: RangeMemory, capBytes: number): string | undefined {
  if (capBytes <= 0 || need.total < capBytes) return undefined;
  return `needs ${gib(need.total)} (weights ${gib(need.weightBytes)} + KV ${gib(need.kvBytes)}), ` +
    `more than the engine's ${gib(capBytes)}`;
}
