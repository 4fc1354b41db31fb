// DeepSeek-V4's structure for synthetic models: every feature llama.cpp's deepseek4 graph has,
// small. The residual stream is hc_mult (4, the only count the graph takes) streams of n_embd
// mixed by hyper-connections; attention is one K/V head with sinks and a grouped low-rank
// output; layers compress their keys every 4 tokens (a lightning indexer choosing among them),
// every 128, or not at all; the first layers route tokens to experts by token id (a table),
// the rest by sqrt-softplus scores with a selection bias.
import type { MetadataEntry } from "../gguf/writer.ts";

/** Hyper-connection streams: llama.cpp's deepseek4 graph asserts 4. */
export const DSV4_HC = 4;
/** Tokens one compressed key stands for, layer after layer: 4 (with a lightning indexer), 128,
 *  0 (none). Every kind appears in every range of three layers or more. */
const RATIOS = [4, 128, 0] as const;
/** The attention output's groups, and the rank each group's projection goes through. */
const O_GROUPS = 2;
const O_LORA_RANK = 16;

export interface Dsv4Shape {
  readonly nLayer: number;
  readonly nextn: number;
  readonly nEmbd: number;
  readonly nHead: number;
  readonly headDim: number;
  readonly nVocab: number;
  readonly nExpert: number;
  readonly nExpertUsed: number;
  readonly nExpertShared: number;
  readonly nFfExp: number;
  readonly qLoraRank: number;
  readonly indexerHeads: number;
  readonly indexerDim: number;
  readonly indexerTopK: number;
  readonly slidingWindow: number;
  readonly hashLayers: number;
}

/** Each layer's compression ratio (the MTP layers': none). */
export function dsv4Ratios(o: Pick<Dsv4Shape, "nLayer" | "nextn">): number[] {
  return Array.from({ length: o.nLayer + o.nextn }, (_, il) => (il < o.nLayer ? RATIOS[il % 3] : 0));
}

export function dsv4Metadata(a: string, o: Dsv4Shape): MetadataEntry[] {
  return [
    [`${a}.expert_shared_count`, o.nExpertShared, "u32"],
    [`${a}.expert_weights_scale`, 1.0, "f32"],
    [`${a}.expert_weights_norm`, true, "bool"],
    // sqrt(softplus) scores, the only routing llama.cpp's deepseek4 loader takes
    [`${a}.expert_gating_func`, 4, "u32"],
    [`${a}.swiglu_clamp_exp`, 10, "f32"],
    [`${a}.hash_layer_count`, o.hashLayers, "u32"],
    [`${a}.nextn_predict_layers`, o.nextn, "u32"],
    [`${a}.attention.q_lora_rank`, o.qLoraRank, "u32"],
    [`${a}.attention.sliding_window`, o.slidingWindow, "u32"],
    [`${a}.attention.output_group_count`, O_GROUPS, "u32"],
    [`${a}.attention.output_lora_rank`, O_LORA_RANK, "u32"],
    [`${a}.attention.compress_rope_freq_base`, 40000, "f32"],
    [`${a}.attention.compress_ratios`, dsv4Ratios(o), { array: "u32" }],
    [`${a}.attention.indexer.head_count`, o.indexerHeads, "u32"],
    [`${a}.attention.indexer.key_length`, o.indexerDim, "u32"],
    [`${a}.attention.indexer.top_k`, o.indexerTopK, "u32"],
    [`${a}.hyper_connection.count`, DSV4_HC, "u32"],
    [`${a}.hyper_connection.sinkhorn_iterations`, 3, "u32"],
    [`${a}.hyper_connection.epsilon`, 1e-6, "f32"],
  ];
}

/** How synth.ts draws a tensor: a matrix in the weight type, a norm's gains (1 ± jitter), a
 *  small f32 bias, an f32 matrix, or the hash-routing table. */
export interface Dsv4Draw {
  weight(name: string, shape: number[], std: number): void;
  norm(name: string, n: number): void;
  bias(name: string, n: number): void;
  f32(name: string, shape: number[], std: number): void;
  expertTable(name: string, shape: number[]): void;
}

const inv = (n: number) => 1 / Math.sqrt(n);

/** Layer il's tensors (the feed-forward's are synth.ts's: the MoE with shared experts). */
export function dsv4Layer(d: Dsv4Draw, o: Dsv4Shape, il: number): void {
  const p = `blk.${il}.`;
  const { nEmbd: E, nHead: H, headDim: D, qLoraRank: QL, indexerHeads: IH, indexerDim: ID } = o;
  const mix = (2 + DSV4_HC) * DSV4_HC;
  d.norm(`${p}attn_norm.weight`, E);
  d.bias(`${p}attn_sinks.weight`, H);
  d.weight(`${p}attn_q_a.weight`, [E, QL], inv(E));
  d.norm(`${p}attn_q_a_norm.weight`, QL);
  d.weight(`${p}attn_q_b.weight`, [QL, H * D], inv(QL));
  d.weight(`${p}attn_kv.weight`, [E, D], inv(E));
  d.norm(`${p}attn_kv_a_norm.weight`, D);
  // stored 2-d; llama.cpp views it as one [H·D/G, rank] matrix per group
  d.weight(`${p}attn_output_a.weight`, [(H * D) / O_GROUPS, O_LORA_RANK * O_GROUPS], inv((H * D) / O_GROUPS));
  d.weight(`${p}attn_output_b.weight`, [O_GROUPS * O_LORA_RANK, E], inv(O_GROUPS * O_LORA_RANK));
  // the hyper-connections around attention and the feed-forward: mixes from all streams
  for (const at of ["attn", "ffn"]) {
    d.f32(`${p}hc_${at}_fn.weight`, [DSV4_HC * E, mix], inv(DSV4_HC * E));
    d.bias(`${p}hc_${at}_base.weight`, mix);
    d.norm(`${p}hc_${at}_scale.weight`, 3);
  }
  const ratio = dsv4Ratios(o)[il];
  if (ratio !== 0) {
    // the 4-token compressor overlaps windows: two halves per key
    const c = ratio === 4 ? 2 : 1;
    d.weight(`${p}attn_compressor_kv.weight`, [E, c * D], inv(E));
    d.weight(`${p}attn_compressor_gate.weight`, [E, c * D], inv(E));
    d.f32(`${p}attn_compressor_ape.weight`, [c * D, ratio], 0.1);
    d.norm(`${p}attn_compressor_norm.weight`, D);
    if (ratio === 4) {
      d.weight(`${p}indexer.proj.weight`, [E, IH], inv(E));
      d.weight(`${p}indexer.attn_q_b.weight`, [QL, IH * ID], inv(QL));
      d.weight(`${p}indexer_compressor_kv.weight`, [E, 2 * ID], inv(E));
      d.weight(`${p}indexer_compressor_gate.weight`, [E, 2 * ID], inv(E));
      d.f32(`${p}indexer_compressor_ape.weight`, [2 * ID, 4], 0.1);
      d.norm(`${p}indexer_compressor_norm.weight`, ID);
    }
  }
  d.f32(`${p}ffn_gate_inp.weight`, [E, o.nExpert], inv(E));
  if (il < o.hashLayers) d.expertTable(`${p}ffn_gate_tid2eid.weight`, [o.nExpertUsed, o.nVocab]);
  else d.bias(`${p}exp_probs_b.bias`, o.nExpert);
}

/** The head's hyper-connection: one weight per stream, from all of them. */
export function dsv4Head(d: Dsv4Draw, o: Pick<Dsv4Shape, "nEmbd">): void {
  d.f32("output_hc_fn.weight", [DSV4_HC * o.nEmbd, DSV4_HC], inv(DSV4_HC * o.nEmbd));
  d.bias("output_hc_base.weight", DSV4_HC);
  d.norm("output_hc_scale.weight", 1);
}
