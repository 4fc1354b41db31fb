// The KV cache's shape from a GGUF header, layer by layer, as llama.cpp allocates it: K and V
// rows of key_length × head_count_kv and value_length × head_count_kv (grouped-query attention
// makes them narrower than the residual stream); multi-head latent attention (DeepSeek) caches
// one compressed K row per token and no V (V is read out of K), and with sparse attention
// (glm-dsa) a full indexer layer caches its indexer keys too; sliding-window layers (Gemma 3)
// are marked with their window. DeepSeek-V4 caches one K row per token in every layer, and
// besides it keys compressed 4 or 128 tokens to a row, in caches of their own.
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
  /** a cache that keeps one stream per sequence even in a shared pool, each stream then as
   *  large as the pool (deepseek4) */
  readonly streams?: "per-sequence";
  /** keys compressed to one row per `ratio` tokens, each in a cache of its own (deepseek4) */
  readonly compressed?: readonly { readonly ratio: number; readonly k: number }[];
  /** the compressors' running state, in bytes per stream */
  readonly stateBytes?: number;
}

export interface KvShape {
  /** the residual stream's width */
  readonly nEmbd: number;
  readonly nLayer: number;
  /** per trunk layer, then the layers after the trunk that keep a cache too (deepseek4's MTP
   *  layer): the last range holds those */
  readonly layers: readonly KvLayer[];
}

/** llama.cpp's default sliding-window pattern for an architecture that has one: every n-th layer
 *  attends to the whole context (the key <arch>.attention.sliding_window_pattern overrides it). */
const SWA_PATTERN: Record<string, number> = { gemma3: 6 };

export function kvShape(h: GgufHeader): KvShape {
  const a = arch(h);
  const nEmbd = metaNumber(h, `${a}.embedding_length`) ?? 0;
  const nLayer = trunkLayers(h);
  if (a === "deepseek4") return { nEmbd, nLayer, layers: deepseek4Kv(h, nLayer) };
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

/** deepseek4: in every layer (the MTP layer's too) one K row per token of key_length (its one
 *  head's K, V read out of it) in a windowed cache kept whole; compressed keys every 4 tokens
 *  beside the lightning indexer's every 4, or every 128; the compressors' state, f32 K and score
 *  rows over their windows (2 × 4 rows of twice the width every 4 tokens, overlapping; 128 rows
 *  every 128). */
function deepseek4Kv(h: GgufHeader, nLayer: number): KvLayer[] {
  const a = "deepseek4";
  const k = metaNumber(h, `${a}.attention.key_length`) ?? 0;
  const ik = metaNumber(h, `${a}.attention.indexer.key_length`) ?? 0;
  const window = metaNumber(h, `${a}.attention.sliding_window`) ?? 0;
  const ratios = metaArray(h, `${a}.attention.compress_ratios`) ?? [];
  const all = nLayer + (metaNumber(h, `${a}.nextn_predict_layers`) ?? 0);
  const state = (rows: number, width: number) => 2 * rows * width * 4;
  return Array.from({ length: all }, (_, il): KvLayer => {
    const ratio = il < nLayer ? Number(ratios[il] ?? 0) : 0;
    const raw = { k, v: 0, window, streams: "per-sequence" } as const;
    if (ratio === 4) {
      const compressed = [{ ratio, k }, { ratio, k: ik }];
      return { ...raw, compressed, stateBytes: state(8, 2 * k) + state(8, 2 * ik) };
    }
    if (ratio === 128) return { ...raw, compressed: [{ ratio, k }], stateBytes: state(128, k) };
    return raw;
  });
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
