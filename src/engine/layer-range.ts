// A Shard's layers: the half-open range [start, end) of one model's blocks.
// Branded so that a range cannot be mixed up with a token count or a position.

import { cutRefusal, type CutRule } from "../gguf/cut-points.ts";

export type LayerRange = { readonly start: number; readonly end: number } & {
  readonly __brand: "LayerRange";
};

export class LayerRangeError extends Error {
  override name = "LayerRangeError";
}

/** Checks 0 <= start < end <= nLayer (nLayer when known). */
export function layerRange(start: number, end: number, nLayer?: number): LayerRange {
  if (!Number.isInteger(start) || !Number.isInteger(end)) {
    throw new LayerRangeError(`layer range bounds must be integers, got ${start}:${end}`);
  }
  if (start < 0 || start >= end) throw new LayerRangeError(`empty or reversed layer range ${start}:${end}`);
  if (nLayer !== undefined && end > nLayer) {
    throw new LayerRangeError(`layer range ${start}:${end} ends past the model's ${nLayer} layers`);
  }
  return { start, end } as LayerRange;
}

/** "a:b" → LayerRange. */
export function parseLayerRange(text: string, nLayer?: number): LayerRange {
  const m = /^\s*(\d+)\s*:\s*(\d+)\s*$/.exec(text);
  if (!m) throw new LayerRangeError(`layer range must look like a:b, got "${text}"`);
  return layerRange(Number(m[1]), Number(m[2]), nLayer);
}

/** "0:12,12:30" → ranges that cover [0, nLayer) exactly once, in order. */
export function parseSplit(text: string, nLayer: number, cuts?: CutRule): LayerRange[] {
  const ranges = text.split(",").map((part) => parseLayerRange(part, nLayer));
  let next = 0;
  for (const r of ranges) {
    if (r.start !== next) {
      throw new LayerRangeError(
        `split ${text} must be contiguous from layer 0: expected a range starting at ${next}`,
      );
    }
    const refusal = cutRefusal(cuts, r.start);
    if (refusal) throw new LayerRangeError(`split ${text}: ${refusal}`);
    next = r.end;
  }
  if (next !== nLayer) {
    throw new LayerRangeError(`split ${text} stops at layer ${next}; the model has ${nLayer}`);
  }
  return ranges;
}

/** Splits nLayer layers into `parts` contiguous ranges of near-equal size, each boundary at the
 *  allowed cut nearest its even place (cuts: where no range may start). */
export function evenSplit(nLayer: number, parts: number, cuts?: CutRule): LayerRange[] {
  if (!Number.isInteger(parts) || parts < 1 || parts > nLayer) {
    throw new LayerRangeError(`cannot split ${nLayer} layers into ${parts} ranges`);
  }
  const allowed = Array.from({ length: nLayer }, (_, l) => l).filter((l) => l > 0 && !cutRefusal(cuts, l));
  if (allowed.length < parts - 1) {
    throw new LayerRangeError(`cannot split ${nLayer} layers into ${parts} ranges: ${cuts?.why}`);
  }
  const starts = [0];
  for (let i = 1; i < parts; i++) {
    const even = Math.round((i * nLayer) / parts);
    // past the last boundary, leaving one allowed cut for each range still to come
    const open = allowed.filter((l) => l > starts[i - 1]);
    const usable = open.slice(0, open.length - (parts - 1 - i));
    starts.push(usable.reduce((best, l) => (Math.abs(l - even) < Math.abs(best - even) ? l : best)));
  }
  return starts.map((start, i) => layerRange(start, starts[i + 1] ?? nLayer, nLayer));
}

export const formatRange = (r: LayerRange): string => `${r.start}:${r.end}`;
export const rangeLength = (r: LayerRange): number => r.end - r.start;
