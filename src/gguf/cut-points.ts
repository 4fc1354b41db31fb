// Where a split may cut a model. At any layer, unless the architecture carries state from one
// layer to the next that no seam carries: glm-dsa's shared-indexer layers reuse the top-k of
// the full indexer layer before them, so a range may start only at a full one; deepseek4's
// hash-routed layers pick experts by token id, so they stay in the first range. The rule comes
// from the header; the tracker, `strata up` and placement read it as layers and a reason, never
// as the architecture's internals.
import { arch, type GgufHeader, metaArray, metaNumber, trunkLayers } from "./reader.ts";

export interface CutRule {
  /** layers no range may start at */
  readonly refused: readonly number[];
  readonly why: string;
}

/** The model's rule, or undefined where every layer boundary is a cut. */
export function cutRule(h: GgufHeader): CutRule | undefined {
  if (arch(h) === "deepseek4") {
    const hashed = Math.min(metaNumber(h, "deepseek4.hash_layer_count") ?? 0, trunkLayers(h));
    if (hashed < 2) return undefined;
    return {
      refused: Array.from({ length: hashed - 1 }, (_, i) => i + 1),
      why: "a hash-routed layer picks its experts by token id, and only the first range has them (deepseek4)",
    };
  }
  if (arch(h) !== "glm-dsa") return undefined;
  const nLayer = trunkLayers(h);
  const types = indexerTypes(h, nLayer);
  const refused = types.flatMap((full, il) => (il > 0 && !full ? [il] : []));
  if (refused.length === 0) return undefined;
  return {
    refused,
    why: "a shared-indexer layer reuses the top-k of the full indexer layer before it (glm-dsa)",
  };
}

/** Why a range may not start at `start`, or undefined when it may. */
export function cutRefusal(rule: CutRule | undefined, start: number): string | undefined {
  if (!rule || !rule.refused.includes(start)) return undefined;
  return `no range may start at layer ${start}: ${rule.why}`;
}

/** glm-dsa's per-layer indexer kinds (true: full), as llama.cpp reads them: the header's list,
 *  else GLM-5.2's (two full layers, then one in four) for a context of 1M or more, else all full
 *  (GLM-5 and 5.1). */
export function indexerTypes(h: GgufHeader, nLayer: number): boolean[] {
  const a = arch(h);
  // DeepSeek-V3.2 has a full indexer in every layer
  if (a !== "glm-dsa") return new Array(nLayer).fill(true);
  const listed = metaArray(h, `${a}.attention.indexer.types`);
  if (listed) return Array.from({ length: nLayer }, (_, il) => Number(listed[il] ?? 0) !== 0);
  const glm52 = (metaNumber(h, `${a}.context_length`) ?? 0) >= 1048576;
  return Array.from({ length: nLayer }, (_, il) => !glm52 || il < 2 || (il - 2) % 4 === 0);
}
