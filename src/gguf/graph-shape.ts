// The widths of a layer's activations, from a GGUF's tensor shapes: what the compute
// buffers of one decode graph scale with (src/engine/memory-cap.ts estimates them).
import { arch, type GgufHeader, metaNumber } from "./reader.ts";

export interface GraphShape {
  /** the residual stream's width (n_embd) */
  readonly nEmbd: number;
  /** a token's Q row (n_head × head_dim) */
  readonly nEmbdQ: number;
  /** a token's K and V rows together */
  readonly nEmbdKv2: number;
  /** feed-forward floats a token holds in one layer: n_ff, or the used experts' and the router's */
  readonly nFf: number;
  readonly nVocab: number;
  readonly nHead: number;
}

/** What the tensor shapes do not say: from the header's metadata when there is one. */
export interface GraphFacts {
  readonly nHead?: number;
  readonly nExpertUsed?: number;
}

interface Shaped {
  readonly name: string;
  /** ggml ne order: shape[0] is the row length */
  readonly shape: readonly number[];
}

/**
 * From the tensors alone (a manifest), heads are taken as 64 wide, the narrowest that the
 * architectures the fork runs use (more heads than the model has: an upper bound); an MoE
 * without its expert_used_count counts every expert.
 */
export function graphShape(tensors: readonly Shaped[], facts: GraphFacts = {}): GraphShape {
  const byName = new Map(tensors.map((t) => [t.name, t.shape]));
  const dim = (name: string, i: number) => byName.get(name)?.[i];
  const embd = byName.get("token_embd.weight") ?? byName.get("output.weight");
  const nEmbd = embd?.[0] ?? dim("blk.0.attn_norm.weight", 0) ?? 0;
  const nVocab = dim("output.weight", 1) ?? embd?.[1] ?? 0;
  const nEmbdQ = dim("blk.0.attn_q.weight", 1) ?? nEmbd;
  const nEmbdKv2 = (dim("blk.0.attn_k.weight", 1) ?? nEmbd) + (dim("blk.0.attn_v.weight", 1) ?? nEmbd);
  const shared = dim("blk.0.ffn_up_shexp.weight", 1) ?? 0;
  const experts = byName.get("blk.0.ffn_up_exps.weight");
  const nFf = experts
    // the used experts' rows and the router's logits, one per expert
    ? (facts.nExpertUsed ?? experts[2]) * experts[1] + experts[2] + shared
    : (dim("blk.0.ffn_up.weight", 1) ?? 4 * nEmbd) + shared;
  const nHead = facts.nHead ?? Math.ceil(nEmbdQ / 64);
  return { nEmbd, nEmbdQ, nEmbdKv2, nFf, nVocab, nHead };
}

/** The header's shape, with its head and expert counts. */
export function headerGraphShape(h: GgufHeader): GraphShape {
  const a = arch(h);
  return graphShape(h.tensors, {
    nHead: metaNumber(h, `${a}.attention.head_count`),
    nExpertUsed: metaNumber(h, `${a}.expert_used_count`),
  });
}
