// The KV cache's shape from a GGUF header. With grouped-query attention K and V rows are
// narrower than the residual stream: n_embd × head_count_kv / head_count.
import { arch, blockCount, type GgufHeader, metaNumber } from "./reader.ts";

export interface KvShape {
  /** the residual stream's width */
  readonly nEmbd: number;
  /** a K (or V) row's width */
  readonly nEmbdKv: number;
  readonly nLayer: number;
}

export function kvShape(h: GgufHeader): KvShape {
  const a = arch(h);
  const nEmbd = metaNumber(h, `${a}.embedding_length`) ?? 0;
  const nHead = metaNumber(h, `${a}.attention.head_count`) ?? 1;
  // no head_count_kv: every head has its own K and V
  const nHeadKv = metaNumber(h, `${a}.attention.head_count_kv`) ?? nHead;
  return { nEmbd, nEmbdKv: nEmbd * nHeadKv / nHead, nLayer: blockCount(h) };
}
