// Tiny random-weight GGUF models that llama.cpp loads and runs, for tests that need a real
// model in milliseconds. Weights come from a seeded PRNG using only exact IEEE arithmetic
// (no Math.log/cos), so the same options give the same bytes, and the same artifact sha256,
// in every JS engine: a browser tab and a Deno node can each synthesize the same artifact.

import { type MetadataEntry, writeGguf } from "../gguf/writer.ts";
import { GgmlType } from "../gguf/types.ts";
import { type GgufHeader, metaString } from "../gguf/reader.ts";
import { f16Into, q4_0Into, q8_0Into } from "../gguf/encode.ts";
import { GaussianStream } from "./seeded.ts";
import { BASE_VOCAB, fillerBytes, SPECIAL_TOKENS, vocabMetadata } from "./synth-vocab.ts";
import { ggufFileBytes, ggufLayout, ggufMetadataBytes } from "../gguf/stream.ts";
import { dsv4Head, dsv4Layer, dsv4Metadata } from "./synth-deepseek4.ts";

/** Architectures synthModel writes weights for; any other name gets a header without tensors. */
export const SYNTH_ARCHS = [
  "llama",
  "qwen2",
  "qwen3",
  "qwen3moe",
  "gemma3",
  "deepseek2",
  "glm4moe",
  "glm-dsa",
  "deepseek32",
  "deepseek4",
] as const;
export type SynthArch = (typeof SYNTH_ARCHS)[number];
export const SYNTH_WEIGHT_TYPES = ["f32", "f16", "q8_0", "q4_0"] as const;
export type SynthWeightType = (typeof SYNTH_WEIGHT_TYPES)[number];

export interface SynthOptions {
  /** One of SYNTH_ARCHS, or any other name for a header-only model. */
  readonly arch: string;
  readonly seed?: number;
  readonly nLayer?: number;
  readonly nEmbd?: number;
  readonly nHead?: number;
  readonly nHeadKv?: number;
  /** Per-head width; defaults to nEmbd / nHead. qwen3/qwen3moe/llama may differ from it, qwen2 may not. */
  readonly headDim?: number;
  readonly nFf?: number;
  /** At least 259: 3 special tokens and 256 byte tokens; the rest are BPE merges. */
  readonly nVocab?: number;
  readonly nCtx?: number;
  readonly nExpert?: number;
  readonly nExpertUsed?: number;
  /** Feed-forward width of each expert (qwen3moe). */
  readonly nFfExp?: number;
  /** gemma3: tokens a sliding-window layer attends to (its own included). */
  readonly slidingWindow?: number;
  /** gemma3: every swaPattern-th layer attends to the whole context, the others to the window. */
  readonly swaPattern?: number;
  /** DeepSeek-style MoE (deepseek2, glm4moe, glm-dsa, deepseek32): the first layers with a dense
   *  feed-forward, before the MoE ones. */
  readonly leadingDense?: number;
  /** DeepSeek-style MoE: experts every token goes through, beside the routed ones. */
  readonly nExpertShared?: number;
  /** nextn (MTP) layers stored after the trunk's nLayer (DeepSeek-style MoE: 1 unless given). */
  readonly nextn?: number;
  /** Latent attention (deepseek2, glm-dsa, deepseek32): the ranks of the compressed query and
   *  key/value, and the widths of a head's rotary and non-rotary key parts and of its value. */
  readonly qLoraRank?: number;
  readonly kvLoraRank?: number;
  readonly ropeDim?: number;
  readonly nopeDim?: number;
  readonly vHeadDim?: number;
  /** Sparse attention (glm-dsa, deepseek32): glm-dsa's every indexerEvery-th layer (from 0)
   *  computes its own top-k and the layers between share it (deepseek32: every layer). The
   *  indexer's heads, their width and the keys each query keeps. */
  readonly indexerEvery?: number;
  readonly indexerHeads?: number;
  readonly indexerDim?: number;
  readonly indexerTopK?: number;
  /** deepseek4: the first layers route each token to experts by its id (a table), not by score. */
  readonly hashLayers?: number;
  /** Omit output.weight: the head reuses token_embd.weight. */
  readonly tiedEmbeddings?: boolean;
  /** Type of the weight matrices; norms, biases and the MoE router stay f32. */
  readonly weightType?: SynthWeightType;
  /** PRNG draws per weight: 4 (Irwin–Hall of four uniforms: the values the small models' tests
   *  were tuned on) or 1 (the sum of one draw's four bytes: four times cheaper, for large models). */
  readonly draws?: 1 | 4;
  /** Spread of the token embedding (0.1 unless given). */
  readonly embdStd?: number;
  /** Untied head only: row t of output.weight also holds token (t − shift)'s embedding, scaled so
   *  that a final hidden state that is that embedding alone lifts t's logit by about this many σ
   *  of the logits: the last token's successor tends to win by a clear margin. 0 (the default)
   *  leaves the head random. */
  readonly successor?: number;
}

export const SYNTH_DEFAULTS = {
  seed: 1,
  nLayer: 6,
  nEmbd: 64,
  nHead: 4,
  nHeadKv: 2,
  nFf: 128,
  nVocab: 384,
  nCtx: 512,
  nExpert: 4,
  nExpertUsed: 2,
  nFfExp: 64,
  // small enough that a test's prompt and decode run past the window
  slidingWindow: 8,
  swaPattern: 3,
  leadingDense: 1,
  nExpertShared: 1,
  qLoraRank: 48,
  kvLoraRank: 32,
  ropeDim: 16,
  nopeDim: 16,
  vHeadDim: 16,
  indexerEvery: 3,
  indexerHeads: 2,
  // the indexer keys are rotated by a Hadamard matrix of at least 64 (llama_kv_cache::build_input_k_rot)
  indexerDim: 64,
  // fewer than a test's prompt: the sparse attention does choose
  indexerTopK: 4,
  hashLayers: 0,
  tiedEmbeddings: false,
  weightType: "f32" as SynthWeightType,
  draws: 4 as 1 | 4,
  embdStd: 0.1,
  successor: 0,
} as const;

// Weight scales, tuned against the real engine so that greedy decoding of a random model
// moves between tokens (not one token forever) with clear top-1/top-2 logit gaps.
// The embedding (embdStd, 0.1 by default) is kept small next to what the layers add to the
// residual stream: with tied embeddings a large one makes every token predict itself (greedy
// output stuck on one token). Large models raise it and add a successor head (synth-size.ts):
// over a vocabulary of tens of thousands the random head alone leaves near-ties at most steps.
const LOGIT_STD = 6.0; // spread of the logits for a unit-RMS final hidden state, tied or not
const ATTN_GAIN = 2.0; // sharper attention: the next token depends on context, which breaks short cycles
const NORM_JITTER = 0.1; // norm weights are 1 ± this
const BIAS_STD = 0.1;

export type SynthResolved = Required<Omit<SynthOptions, "headDim">> & { headDim: number };

/** Architectures whose synthetic models carry an MTP layer after the trunk (unless nextn: 0). */
const WITH_NEXTN = ["deepseek2", "glm4moe", "glm-dsa", "deepseek32", "deepseek4"];
/** Architectures with latent attention (MLA) and DeepSeek's MoE (leading dense layers, shared experts). */
const MLA = ["deepseek2", "glm-dsa", "deepseek32"];
const SHARED_EXPERTS = ["deepseek2", "glm4moe", "glm-dsa", "deepseek32", "deepseek4"];
/** Sparse attention with a lightning indexer (DeepSeek-V3.2: in every layer; glm-dsa: every indexerEvery-th). */
const DSA = ["glm-dsa", "deepseek32"];

function resolve(opts: SynthOptions): SynthResolved {
  const o = {
    ...SYNTH_DEFAULTS,
    nextn: WITH_NEXTN.includes(opts.arch) ? 1 : 0,
    // every deepseek4 layer is MoE; its first two route by token id
    ...(opts.arch === "deepseek4" ? { leadingDense: 0, hashLayers: 2 } : {}),
    ...stripUndefined(opts),
  } as Omit<SynthResolved, "headDim"> & { headDim?: number };
  const headDim = o.headDim ?? o.nEmbd / o.nHead;
  // a GGUF of nextn (MTP) layers alone has no trunk
  if (!Number.isInteger(o.nLayer) || o.nLayer < (o.nextn > 0 ? 0 : 1)) {
    throw new RangeError(`synth nLayer must be a positive integer (0 with nextn layers), got ${o.nLayer}`);
  }
  const ints: Array<[string, number]> = [
    ["nEmbd", o.nEmbd],
    ["nHead", o.nHead],
    ["nHeadKv", o.nHeadKv],
    ["headDim", headDim],
    ["nFf", o.nFf],
    ["nVocab", o.nVocab],
    ["nCtx", o.nCtx],
    ["nExpert", o.nExpert],
    ["nExpertUsed", o.nExpertUsed],
    ["nFfExp", o.nFfExp],
    ["slidingWindow", o.slidingWindow],
    ["swaPattern", o.swaPattern],
    ["qLoraRank", o.qLoraRank],
    ["kvLoraRank", o.kvLoraRank],
    ["ropeDim", o.ropeDim],
    ["nopeDim", o.nopeDim],
    ["vHeadDim", o.vHeadDim],
    ["indexerEvery", o.indexerEvery],
    ["indexerHeads", o.indexerHeads],
    ["indexerDim", o.indexerDim],
    ["indexerTopK", o.indexerTopK],
  ];
  for (const [k, v] of ints) {
    if (!Number.isInteger(v) || v <= 0) {
      throw new RangeError(`synth ${k} must be a positive integer, got ${v}`);
    }
  }
  if (o.nHead % o.nHeadKv !== 0) {
    throw new RangeError(`nHead ${o.nHead} must be a multiple of nHeadKv ${o.nHeadKv}`);
  }
  if (headDim % 2 !== 0) throw new RangeError(`head width ${headDim} must be even for rope`);
  if (o.arch === "qwen2" && headDim * o.nHead !== o.nEmbd) {
    throw new RangeError("qwen2 needs headDim * nHead = nEmbd");
  }
  for (
    const [k, v] of [
      ["leadingDense", o.leadingDense],
      ["nExpertShared", o.nExpertShared],
      ["nextn", o.nextn],
      ["hashLayers", o.hashLayers],
    ]
  ) {
    if (!Number.isInteger(v) || (v as number) < 0) {
      throw new RangeError(`synth ${k} must be an integer ≥ 0, got ${v}`);
    }
  }
  if (o.hashLayers > o.nLayer) throw new RangeError(`hashLayers ${o.hashLayers} exceeds nLayer ${o.nLayer}`);
  if (o.leadingDense > o.nLayer) {
    throw new RangeError(`leadingDense ${o.leadingDense} exceeds nLayer ${o.nLayer}`);
  }
  if (o.nExpertUsed > o.nExpert) {
    throw new RangeError(`nExpertUsed ${o.nExpertUsed} exceeds nExpert ${o.nExpert}`);
  }
  if (o.nVocab < SPECIAL_TOKENS.length + 256) {
    throw new RangeError(`nVocab must be at least ${SPECIAL_TOKENS.length + 256}, got ${o.nVocab}`);
  }
  if (!Number.isInteger(o.seed)) throw new RangeError(`seed must be an integer, got ${o.seed}`);
  if (!(o.embdStd > 0)) throw new RangeError(`embdStd must be positive, got ${o.embdStd}`);
  if (!(o.successor >= 0)) throw new RangeError(`successor must be at least 0, got ${o.successor}`);
  if (o.draws !== 1 && o.draws !== 4) throw new RangeError(`draws must be 1 or 4, got ${o.draws}`);
  if (!(SYNTH_WEIGHT_TYPES as readonly string[]).includes(o.weightType)) {
    throw new RangeError(`weight type must be one of ${SYNTH_WEIGHT_TYPES.join(", ")}, got ${o.weightType}`);
  }
  return { ...o, headDim };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** A GGUF file for opts.arch with seeded random weights, built in memory (small models). */
export function synthModel(opts: SynthOptions): Uint8Array {
  const o = resolve(opts);
  return writeGguf({
    metadata: metadata(o),
    tensors: plan(o).map((t) => ({
      name: t.name,
      shape: t.shape,
      type: GGML_TYPE[t.encoding],
      data: renderPiece({ ...t, from: 0, to: t.values }),
    })),
  });
}

/** What a tensor is stored as: a weight type, or i32 (deepseek4's table of experts per token id,
 *  (id + j) mod n_expert: computed, not drawn). */
export type SynthEncoding = SynthWeightType | "i32";

/** Where a model's values come from: seeded gaussians of one tensor's stream, in one encoding. */
export interface SynthTensor {
  readonly name: string;
  readonly shape: readonly number[];
  readonly encoding: SynthEncoding;
  readonly seed: number;
  readonly std: number;
  readonly mean: number;
  readonly draws: 1 | 4;
  /** Plus, in each row r from `fromRow` on, `std` times row (r - shift) mod rows of another
   *  tensor's stream (with unit std): the successor head. */
  readonly plus?: {
    readonly name: string;
    readonly std: number;
    readonly shift: number;
    readonly rows: number;
    readonly fromRow: number;
  };
  /** i32 expert tables: the count their ids run up to */
  readonly experts?: number;
  /** Number of values (the product of the shape). */
  readonly values: number;
}

/** Values [from, to) of one tensor (block-aligned for the quantized types): plain data, so a
 *  worker can render it. */
export interface SynthPiece extends SynthTensor {
  readonly from: number;
  readonly to: number;
}

/** A synthetic model laid out for writing piece by piece (synthChunks), without its data. */
export interface SynthFile {
  readonly options: Readonly<SynthResolved>;
  /** Everything before the first tensor's data. */
  readonly header: Uint8Array;
  /** After the header, in file order: tensor pieces, and runs of zero padding (a byte count). */
  readonly pieces: ReadonlyArray<SynthPiece | number>;
  readonly fileBytes: number;
  /** Number of weights (every tensor element). */
  readonly parameters: number;
}

const GGML_TYPE: Record<SynthEncoding, number> = {
  i32: GgmlType.I32,
  f32: GgmlType.F32,
  f16: GgmlType.F16,
  q8_0: GgmlType.Q8_0,
  q4_0: GgmlType.Q4_0,
};
const BLOCK = 32; // values per q8_0 / q4_0 block

/** The model synthModel writes, as a header and pieces of at most pieceValues values each. */
export function synthFile(opts: SynthOptions, pieceValues = 1 << 20): SynthFile {
  if (!Number.isInteger(pieceValues) || pieceValues <= 0 || pieceValues % BLOCK !== 0) {
    throw new RangeError(`pieceValues must be a positive multiple of ${BLOCK}`);
  }
  const o = resolve(opts);
  const tensors = plan(o);
  const layout = ggufLayout(
    metadata(o),
    tensors.map((t) => ({ name: t.name, shape: t.shape, type: GGML_TYPE[t.encoding] })),
  );
  const pieces: Array<SynthPiece | number> = [];
  tensors.forEach((t, i) => {
    for (let from = 0; from < t.values; from += pieceValues) {
      pieces.push({ ...t, from, to: Math.min(t.values, from + pieceValues) });
    }
    if (layout.tensors[i].pad > 0) pieces.push(layout.tensors[i].pad);
  });
  return {
    options: o,
    header: layout.header,
    pieces,
    fileBytes: layout.fileBytes,
    parameters: tensors.reduce((a, t) => a + t.values, 0),
  };
}

/** The size of the file synthModel would write, and its number of weights, without drawing one. */
export function synthSize(opts: SynthOptions): { fileBytes: number; parameters: number } {
  const o = resolve(opts);
  const tensors = plan(o);
  // every hyperparameter has a fixed width: the metadata's length depends only on the arch, the
  // type being f32 or not, and the vocabulary (whose fillers add a known length each)
  const base = Math.min(o.nVocab, BASE_VOCAB);
  const key = `${o.arch}|${base}|${o.weightType === "f32"}|${o.nextn > 0}`;
  let kv = metadataLengths.get(key);
  if (kv === undefined) {
    if (metadataLengths.size > 64) metadataLengths.clear();
    kv = ggufMetadataBytes(metadata({ ...o, nVocab: base })).length;
    metadataLengths.set(key, kv);
  }
  if (o.nVocab > base) kv += fillerBytes(o.nVocab);
  return {
    fileBytes: ggufFileBytes(
      kv,
      tensors.map((t) => ({ name: t.name, shape: t.shape, type: GGML_TYPE[t.encoding] })),
    ),
    parameters: tensors.reduce((a, t) => a + t.values, 0),
  };
}
const metadataLengths = new Map<string, number>();

/** The file's bytes in order, one piece at a time: the same bytes synthModel returns. With
 *  reuse, the pieces share two buffers: each chunk is valid only until the next is asked for
 *  (a writer that awaits each write keeps its memory flat). */
export function* synthChunks(file: SynthFile, { reuse = false } = {}): Generator<Uint8Array> {
  yield file.header;
  let scratch: Float32Array | undefined, out: Uint8Array | undefined;
  for (const p of file.pieces) {
    if (typeof p === "number") {
      yield new Uint8Array(p);
      continue;
    }
    const n = p.to - p.from;
    if (!reuse) {
      if (!scratch || scratch.length < n) scratch = new Float32Array(n);
      yield renderPiece(p, scratch);
      continue;
    }
    if (!scratch || scratch.length < n) {
      scratch = new Float32Array(n);
      out = new Uint8Array(n * 4);
    }
    yield renderPiece(p, scratch, out);
  }
}

/** One piece's bytes in its tensor's encoding. A scratch array (at least the piece's length)
 *  saves an allocation, and so does out (at least 4 bytes a value): the bytes are then a view
 *  of out, or of scratch for f32. */
export function renderPiece(p: SynthPiece, scratch?: Float32Array, out?: Uint8Array): Uint8Array {
  const n = p.to - p.from;
  if (p.encoding === "i32") return expertTable(p);
  const values = scratch && scratch.length >= n && (p.encoding !== "f32" || out)
    ? scratch.subarray(0, n)
    : new Float32Array(n);
  const stream = new GaussianStream(p.seed, p.name, p.draws);
  stream.seek(p.from);
  stream.fill(values, p.std, p.mean);
  if (p.plus) addRows(p, values);
  if (p.encoding === "f32") return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const size = { f16: 2 * n, q8_0: (n / BLOCK) * 34, q4_0: (n / BLOCK) * 18 }[p.encoding];
  const bytes = out && out.length >= size ? out.subarray(0, size) : new Uint8Array(size);
  if (p.encoding === "f16") f16Into(values, bytes);
  else if (p.encoding === "q8_0") q8_0Into(values, bytes);
  else q4_0Into(values, bytes);
  return bytes;
}

/** Values [from, to) of an expert table of shape [used, vocab]: token t's j-th expert is
 *  (t + j) mod the expert count. */
function expertTable(p: SynthPiece): Uint8Array {
  const used = p.shape[0];
  const ids = Int32Array.from({ length: p.to - p.from }, (_, i) => {
    const k = p.from + i;
    return (Math.floor(k / used) + (k % used)) % p.experts!;
  });
  return new Uint8Array(ids.buffer);
}

/** Adds p.plus to values, which hold p's values [from, to). */
function addRows(p: SynthPiece, values: Float32Array): void {
  const { name, std, shift, rows, fromRow } = p.plus!;
  const n = p.shape[0];
  const other = new GaussianStream(p.seed, name, p.draws);
  const row = new Float32Array(n);
  for (let r = Math.floor(p.from / n); r * n < p.to; r++) {
    if (r < fromRow) continue;
    const a = Math.max(p.from, r * n), b = Math.min(p.to, (r + 1) * n);
    other.seek((((r - shift) % rows) + rows) % rows * n + (a - r * n));
    other.fill(row, std, 0, 0, b - a);
    for (let i = a; i < b; i++) values[i - p.from] = Math.fround(values[i - p.from] + row[i - a]);
  }
}

const SYNTH_NAME = "strata-synth-";

/** Whether a GGUF is one of ours: its vocabulary and weights are random, so text means nothing to it. */
export function isSynthetic(h: GgufHeader): boolean {
  return (metaString(h, "general.name") ?? "").startsWith(SYNTH_NAME);
}

function metadata(o: SynthResolved): MetadataEntry[] {
  const known = (SYNTH_ARCHS as readonly string[]).includes(o.arch);
  return [...hparams(o, known), ...vocabMetadata(o)];
}

function hparams(o: SynthResolved, known: boolean): MetadataEntry[] {
  const a = o.arch;
  const fileType = { f32: 0, f16: 1, q8_0: 7, q4_0: 2 }[o.weightType];
  const md: MetadataEntry[] = [
    ["general.architecture", a, "string"],
    ["general.name", `${SYNTH_NAME}${a}`, "string"],
    ["general.file_type", fileType, "u32"],
    [`${a}.context_length`, o.nCtx, "u32"],
    [`${a}.embedding_length`, o.nEmbd, "u32"],
    [`${a}.block_count`, o.nLayer + (known ? o.nextn : 0), "u32"],
    [`${a}.feed_forward_length`, o.nFf, "u32"],
    [`${a}.attention.head_count`, o.nHead, "u32"],
    [`${a}.attention.head_count_kv`, MLA.includes(a) || a === "deepseek4" ? 1 : o.nHeadKv, "u32"],
    // MLA caches one compressed K row per token (kv_lora_rank + the rotary part), V its first kv_lora_rank values
    [`${a}.attention.key_length`, MLA.includes(a) ? o.kvLoraRank + o.ropeDim : o.headDim, "u32"],
    [`${a}.attention.value_length`, MLA.includes(a) ? o.kvLoraRank : o.headDim, "u32"],
    [`${a}.attention.layer_norm_rms_epsilon`, 1e-6, "f32"],
    // glm4moe rotates half of each head, as GLM-4.5 does (deepseek4: half too, the rest plain)
    [
      `${a}.rope.dimension_count`,
      MLA.includes(a) ? o.ropeDim : a === "glm4moe" || a === "deepseek4" ? o.headDim / 2 : o.headDim,
      "u32",
    ],
    [`${a}.rope.freq_base`, a === "gemma3" ? 1e6 : 10000, "f32"],
    [`${a}.vocab_size`, o.nVocab, "u32"],
  ];
  if (known && (a === "qwen3moe" || SHARED_EXPERTS.includes(a))) {
    md.push(
      [`${a}.expert_count`, o.nExpert, "u32"],
      [`${a}.expert_used_count`, o.nExpertUsed, "u32"],
      [`${a}.expert_feed_forward_length`, o.nFfExp, "u32"],
    );
  }
  if (known && SHARED_EXPERTS.includes(a) && a !== "deepseek4") {
    // sigmoid routing with a selection bias, normalized weights (DeepSeek-V3, GLM-4.5)
    md.push(
      [`${a}.leading_dense_block_count`, o.leadingDense, "u32"],
      [`${a}.expert_shared_count`, o.nExpertShared, "u32"],
      [`${a}.expert_weights_scale`, 1.0, "f32"],
      [`${a}.expert_weights_norm`, true, "bool"],
      [`${a}.expert_gating_func`, 2, "u32"],
    );
    if (o.nextn > 0) md.push([`${a}.nextn_predict_layers`, o.nextn, "u32"]);
  }
  if (known && DSA.includes(a)) {
    md.push(
      [`${a}.attention.indexer.head_count`, o.indexerHeads, "u32"],
      [`${a}.attention.indexer.key_length`, o.indexerDim, "u32"],
      [`${a}.attention.indexer.top_k`, o.indexerTopK, "u32"],
    );
    if (a === "glm-dsa") md.push([`${a}.attention.indexer.types`, indexerTypes(o), { array: "u32" }]);
  }
  if (known && MLA.includes(a)) {
    md.push(
      [`${a}.attention.q_lora_rank`, o.qLoraRank, "u32"],
      [`${a}.attention.kv_lora_rank`, o.kvLoraRank, "u32"],
      [`${a}.attention.key_length_mla`, o.nopeDim + o.ropeDim, "u32"],
      [`${a}.attention.value_length_mla`, o.vHeadDim, "u32"],
    );
  }
  if (known && a === "gemma3") {
    // as Gemma 3 itself: local layers rope at 10k, global ones at 1M; a soft cap on the logits
    md.push(
      [`${a}.attention.sliding_window`, o.slidingWindow, "u32"],
      [`${a}.attention.sliding_window_pattern`, o.swaPattern, "u32"],
      [`${a}.rope.freq_base_swa`, 10000, "f32"],
      [`${a}.final_logit_softcapping`, 30, "f32"],
    );
  }
  if (known && a === "deepseek4") md.push(...dsv4Metadata(a, o));
  if (o.weightType !== "f32") md.push(["general.quantization_version", 2, "u32"]);
  return md;
}

// ---- tensors ----

/** The tensors of a known architecture (none for any other: loading must fail before any
 *  tensor is read), each drawn from the stream named after it. */
function plan(o: SynthResolved): SynthTensor[] {
  if (!(SYNTH_ARCHS as readonly string[]).includes(o.arch)) return [];
  const { nEmbd: E, nVocab: V, nFf: F, headDim: D, nHead: H, nHeadKv: HKV, nExpert: X, nFfExp: FX } = o;
  const out: SynthTensor[] = [];
  const add = (name: string, shape: number[], encoding: SynthEncoding, std: number, mean: number) => {
    const values = shape.reduce((a, b) => a * b, 1);
    if (encoding === "q8_0" || encoding === "q4_0") {
      if (shape[0] % BLOCK !== 0) {
        throw new RangeError(
          `${encoding} needs rows that are a multiple of ${BLOCK}: '${name}' has ${shape[0]}`,
        );
      }
    }
    out.push({ name, shape, encoding, seed: o.seed, std, mean, draws: o.draws, values });
  };
  const weight = (name: string, shape: number[], std: number) => add(name, shape, o.weightType, std, 0);
  const norm = (name: string, n: number) => add(name, [n], "f32", NORM_JITTER, 1);
  const gainNorm = (name: string, n: number, g: number) => add(name, [n], "f32", NORM_JITTER * g, g);
  const bias = (name: string, n: number) => add(name, [n], "f32", BIAS_STD, 0);
  const inv = (n: number) => 1 / Math.sqrt(n);
  /** DeepSeek's multi-head latent attention: queries and keys/values through low-rank
   *  compressions, with the key's absorbed up-projection (k_b) and the value's (v_b) per head. */
  const mlaAttention = (p: string) => {
    const { qLoraRank: QL, kvLoraRank: KL, ropeDim: R, nopeDim: N, vHeadDim: DV } = o;
    weight(`${p}attn_q_a.weight`, [E, QL], inv(E));
    norm(`${p}attn_q_a_norm.weight`, QL);
    weight(`${p}attn_q_b.weight`, [QL, H * (N + R)], ATTN_GAIN * inv(QL));
    weight(`${p}attn_kv_a_mqa.weight`, [E, KL + R], ATTN_GAIN * inv(E));
    norm(`${p}attn_kv_a_norm.weight`, KL);
    weight(`${p}attn_k_b.weight`, [N, KL, H], inv(N));
    weight(`${p}attn_v_b.weight`, [KL, DV, H], inv(KL));
    weight(`${p}attn_output.weight`, [H * DV, E], inv(H * DV));
  };

  const dsv4 = {
    weight,
    norm,
    bias,
    f32: (name: string, shape: number[], std: number) => add(name, shape, "f32", std, 0),
    expertTable: (name: string, shape: number[]) =>
      out.push({
        name,
        shape,
        encoding: "i32",
        seed: o.seed,
        std: 0,
        mean: 0,
        draws: o.draws,
        experts: X,
        values: shape[0] * shape[1],
      }),
  };

  weight("token_embd.weight", [E, V], o.embdStd);
  for (let i = 0; i < o.nLayer + o.nextn; i++) {
    const p = `blk.${i}.`;
    if (o.arch === "deepseek4") {
      // its attention, hyper-connections and routing (the experts follow below)
      dsv4Layer(dsv4, o, i);
    } else if (MLA.includes(o.arch)) {
      norm(`${p}attn_norm.weight`, E);
      mlaAttention(p);
    } else {
      norm(`${p}attn_norm.weight`, E);
      weight(`${p}attn_q.weight`, [E, D * H], ATTN_GAIN * inv(E));
      weight(`${p}attn_k.weight`, [E, D * HKV], ATTN_GAIN * inv(E));
      weight(`${p}attn_v.weight`, [E, D * HKV], inv(E));
      if (o.arch === "qwen2" || o.arch === "glm4moe") {
        bias(`${p}attn_q.bias`, D * H);
        bias(`${p}attn_k.bias`, D * HKV);
        bias(`${p}attn_v.bias`, D * HKV);
      }
      weight(`${p}attn_output.weight`, [D * H, E], inv(D * H));
    }
    // (DeepSeek-V3.2's MTP layer has an indexer too: llama.cpp requires it)
    if (DSA.includes(o.arch) && (i < o.nLayer ? indexerTypes(o)[i] : o.arch === "deepseek32")) {
      // the lightning indexer of a full layer: its own queries from the compressed q, one key head
      const { indexerHeads: IH, indexerDim: ID, qLoraRank: QL } = o;
      weight(`${p}indexer.attn_q_b.weight`, [QL, IH * ID], inv(QL));
      weight(`${p}indexer.attn_k.weight`, [E, ID], inv(E));
      norm(`${p}indexer.k_norm.weight`, ID);
      bias(`${p}indexer.k_norm.bias`, ID);
      weight(`${p}indexer.proj.weight`, [E, IH], inv(E));
    }
    if (o.arch === "qwen3" || o.arch === "qwen3moe" || o.arch === "gemma3") {
      gainNorm(`${p}attn_q_norm.weight`, D, ATTN_GAIN);
      gainNorm(`${p}attn_k_norm.weight`, D, ATTN_GAIN);
    }
    // gemma3 norms each block's output before it joins the residual stream
    if (o.arch === "gemma3") norm(`${p}post_attention_norm.weight`, E);
    // glm4moe names its pre-FFN norm post_attention_norm
    norm(o.arch === "glm4moe" ? `${p}post_attention_norm.weight` : `${p}ffn_norm.weight`, E);
    if (o.arch === "gemma3") norm(`${p}post_ffw_norm.weight`, E);
    const sharedExperts = SHARED_EXPERTS.includes(o.arch);
    if (o.arch === "qwen3moe" || (sharedExperts && i >= o.leadingDense)) {
      // the router stays f32, as llama.cpp's quantizer leaves it (deepseek4's: dsv4Layer)
      if (o.arch !== "deepseek4") {
        add(`${p}ffn_gate_inp.weight`, [E, X], "f32", inv(E), 0);
        if (sharedExperts) add(`${p}exp_probs_b.bias`, [X], "f32", BIAS_STD, 0);
      }
      weight(`${p}ffn_gate_exps.weight`, [E, FX, X], inv(E));
      weight(`${p}ffn_up_exps.weight`, [E, FX, X], inv(E));
      weight(`${p}ffn_down_exps.weight`, [FX, E, X], inv(FX));
      if (sharedExperts) {
        const FS = FX * o.nExpertShared;
        weight(`${p}ffn_gate_shexp.weight`, [E, FS], inv(E));
        weight(`${p}ffn_up_shexp.weight`, [E, FS], inv(E));
        weight(`${p}ffn_down_shexp.weight`, [FS, E], inv(FS));
      }
    } else {
      weight(`${p}ffn_gate.weight`, [E, F], inv(E));
      weight(`${p}ffn_up.weight`, [E, F], inv(E));
      weight(`${p}ffn_down.weight`, [F, E], inv(F));
    }
    if (i >= o.nLayer) {
      // the MTP block: the next token's embedding and this hidden state, normed and projected
      weight(`${p}nextn.eh_proj.weight`, [2 * E, E], inv(2 * E));
      norm(`${p}nextn.enorm.weight`, E);
      norm(`${p}nextn.hnorm.weight`, E);
      norm(`${p}nextn.shared_head_norm.weight`, E);
    }
  }
  if (o.arch === "deepseek4") dsv4Head(dsv4, o);
  if (o.tiedEmbeddings) {
    // the head is token_embd itself: the final norm's gain brings the logits to LOGIT_STD
    const gain = LOGIT_STD / (o.embdStd * Math.sqrt(E));
    gainNorm("output_norm.weight", E, gain);
  } else {
    norm("output_norm.weight", E);
    weight("output.weight", [E, V], LOGIT_STD * inv(E));
    if (o.successor > 0) {
      // row t also holds token t - shift's embedding (its unit-variance draws): t's logit rises with
      // how much of that token's embedding the final hidden state keeps, so the last token's
      // successor (shift on: every token once round the vocabulary) stands out
      const last = out.length - 1;
      out[last] = {
        ...out[last],
        plus: {
          name: "token_embd.weight",
          std: (o.successor * LOGIT_STD) / E,
          shift: successorShift(V),
          rows: V,
          fromRow: SPECIAL_TOKENS.length,
        },
      };
    }
  }
  return out;
}

/** The indexer kind of each trunk layer: 1 full, 0 shared (glm-dsa's; DeepSeek-V3.2's are all full). */
function indexerTypes(o: SynthResolved): number[] {
  const every = o.arch === "glm-dsa" ? o.indexerEvery : 1;
  return Array.from({ length: o.nLayer }, (_, il) => (il % every === 0 ? 1 : 0));
}

/** A step coprime with n, near n·(golden ratio − 1): successive tokens land far apart. */
function successorShift(n: number): number {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  let s = Math.max(1, Math.round(n * 0.6180339887));
  while (gcd(s, n) !== 1) s++;
  return s;
}
