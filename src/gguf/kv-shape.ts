// The KV cache's shape from a GGUF header, layer by layer, as llama.cpp allocates it: K and V
// rows of key_length × head_count_kv and value_length × head_count_kv (grouped-query attention
// makes them narrower than the residual stream); multi-head latent attention (DeepSeek) caches
// one compressed K row per token and no V (V is read out of K), and with sparse attention
// (glm-dsa) a full indexer layer caches its indexer keys too; sliding-window layers (Gemma 3)
// are marked with their window.
import { arch, type GgufHeader, metaArray, metaNumber, trunkLayers } from "./reader.ts";
import { indexerTypes } from "./cut-points.ts";

/** One layer's cache: row widths in elements, and the window it attends to (0: all of the context). */
export interface KvLayer {
  readonly k: number;
  /** 0: no V rows of its own (a K-only cache) */
  readonly v: number;
  readonly window: number;
  /** the lightning indexer's key width, in a cache of its own (glm-dsa's full indexer layers) */
  readonly indexer?: number;
}

export interface KvShape {
  /** the residual stream's width */
  readonly nEmbd: number;
  readonly nLayer: number;
  /** per trunk layer */
  readonly layers: readonly KvLayer[];
}

/** llama.cpp's default sliding-window pattern for an architecture that has one: every n-th layer
 *  attends to the whole context (the key <arch>.attention.sliding_window_pattern overrides it). */
const SWA_PATTERN: Record<string, number> = { gemma3: 6 };

export function kvShape(h: GgufHeader): KvShape {
  const a = arch(h);
  const nEmbd = metaNumber(h, `${a}.embedding_length`) ?? 0;
  const nLayer = trunkLayers(h);
  const nHead = metaNumber(h, `${a}.attention.head_count`) ?? 1;
  // no head_count_kv: every head has its own K and V
  const nHeadKv = metaNumber(h, `${a}.attention.head_count_kv`) ?? nHead;
  const keyLength = metaNumber(h, `${a}.attention.key_length`) ?? nEmbd / nHead;
  const valueLength = metaNumber(h, `${a}.attention.value_length`) ?? nEmbd / nHead;
  const swa = slidingWindows(h, a, nLayer);
  const mla = metaNumber(h, `${a}.attention.key_length_mla`) !== undefined;
  const indexer = a === "glm-dsa" || a === "deepseek32"
    ? metaNumber(h, `${a}.attention.indexer.key_length`) ?? 0
    : 0;
  const full = indexer > 0 ? indexerTypes(h, nLayer) : [];
  const layers = Array.from({ length: nLayer }, (_, il) => ({
    k: keyLength * nHeadKv,
    v: mla ? 0 : valueLength * nHeadKv,
    window: swa[il],
    ...(full[il] ? { indexer } : {}),
  }));
  return { nEmbd, nLayer, layers };
}

/** Each layer's window, or 0 where it sees the whole context. */
function slidingWindows(h: GgufHeader, a: string, nLayer: number): number[] {
  const window = metaNumber(h, `${a}.attention.sliding_window`) ?? 0;
  const fallback = SWA_PATTERN[a];
  if (fallback === undefined || window <= 0) return new Array(nLayer).fill(0);
  // one flag per layer: true where the layer slides
  const flags = metaArray(h, `${a}.attention.sliding_window_pattern`);
  if (flags) return Array.from({ length: nLayer }, (_, il) => (flags[il] ? window : 0));
  const n = metaNumber(h, `${a}.attention.sliding_window_pattern`) ?? fallback;
  // as llama_hparams::set_swa_pattern: the last layer of every n is global (n = 0: all slide)
  return Array.from({ length: nLayer }, (_, il) => (n === 0 || il % n < n - 1 ? window : 0));
}

/** The same widths everywhere, no windows: a model known only by its K width. */
export function uniformKv(nLayer: number, width: number): KvLayer[] {
  return new Array(nLayer).fill({ k: width, v: width, window: 0 });
}
