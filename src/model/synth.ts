// Tiny random-weight GGUF models that llama.cpp loads and runs, for tests that need a real
// model in milliseconds. Weights come from a seeded PRNG using only exact IEEE arithmetic
// (no Math.log/cos), so the same options give the same bytes, and the same artifact sha256,
// in every JS engine: a browser tab and a Deno node can each synthesize the same artifact.

import { type GgufTensorInput, type MetadataEntry, writeGguf } from "../gguf/writer.ts";
import { GgmlType } from "../gguf/types.ts";
import { toF16, toQ8_0 } from "../gguf/encode.ts";
import { gaussian } from "./seeded.ts";
import { SPECIAL_TOKENS, vocabMetadata } from "./synth-vocab.ts";

/** Architectures synthModel writes weights for; any other name gets a header without tensors. */
export const SYNTH_ARCHS = ["llama", "qwen2", "qwen3", "qwen3moe"] as const;
export type SynthArch = (typeof SYNTH_ARCHS)[number];
export type SynthWeightType = "f32" | "f16" | "q8_0";

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
  /** Omit output.weight: the head reuses token_embd.weight. */
  readonly tiedEmbeddings?: boolean;
  /** Type of the weight matrices; norms, biases and the MoE router stay f32. */
  readonly weightType?: SynthWeightType;
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
  tiedEmbeddings: false,
  weightType: "f32" as SynthWeightType,
} as const;

// Weight scales, tuned against the real engine so that greedy decoding of a random model
// moves between tokens (not one token forever) with clear top-1/top-2 logit gaps.
// The embedding is kept small next to what the layers add to the residual stream: with tied
// embeddings a large one makes every token predict itself (greedy output stuck on one token).
const EMBD_STD = 0.1;
const LOGIT_STD = 6.0; // spread of the logits for a unit-RMS final hidden state, tied or not
const ATTN_GAIN = 2.0; // sharper attention: the next token depends on context, which breaks short cycles
const NORM_JITTER = 0.1; // norm weights are 1 ± this
const BIAS_STD = 0.1;

type Resolved = Required<Omit<SynthOptions, "headDim">> & { headDim: number };

function resolve(opts: SynthOptions): Resolved {
  const o = { ...SYNTH_DEFAULTS, ...stripUndefined(opts) } as Omit<Resolved, "headDim"> & {
    headDim?: number;
  };
  const headDim = o.headDim ?? o.nEmbd / o.nHead;
  const ints: Array<[string, number]> = [
    ["nLayer", o.nLayer],
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
  if (o.nExpertUsed > o.nExpert) {
    throw new RangeError(`nExpertUsed ${o.nExpertUsed} exceeds nExpert ${o.nExpert}`);
  }
  if (o.nVocab < SPECIAL_TOKENS.length + 256) {
    throw new RangeError(`nVocab must be at least ${SPECIAL_TOKENS.length + 256}, got ${o.nVocab}`);
  }
  if (!Number.isInteger(o.seed)) throw new RangeError(`seed must be an integer, got ${o.seed}`);
  return { ...o, headDim };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** A GGUF file for opts.arch with seeded random weights. */
export function synthModel(opts: SynthOptions): Uint8Array {
  const o = resolve(opts);
  const known = (SYNTH_ARCHS as readonly string[]).includes(o.arch);
  return writeGguf({
    metadata: [...hparams(o, known), ...vocabMetadata(o)],
    // an unknown architecture only needs a header: loading must fail before any tensor is read
    tensors: known ? tensors(o) : [],
  });
}

function hparams(o: Resolved, known: boolean): MetadataEntry[] {
  const a = o.arch;
  const fileType = { f32: 0, f16: 1, q8_0: 7 }[o.weightType];
  const md: MetadataEntry[] = [
    ["general.architecture", a, "string"],
    ["general.name", `strata-synth-${a}`, "string"],
    ["general.file_type", fileType, "u32"],
    [`${a}.context_length`, o.nCtx, "u32"],
    [`${a}.embedding_length`, o.nEmbd, "u32"],
    [`${a}.block_count`, o.nLayer, "u32"],
    [`${a}.feed_forward_length`, o.nFf, "u32"],
    [`${a}.attention.head_count`, o.nHead, "u32"],
    [`${a}.attention.head_count_kv`, o.nHeadKv, "u32"],
    [`${a}.attention.key_length`, o.headDim, "u32"],
    [`${a}.attention.value_length`, o.headDim, "u32"],
    [`${a}.attention.layer_norm_rms_epsilon`, 1e-6, "f32"],
    [`${a}.rope.dimension_count`, o.headDim, "u32"],
    [`${a}.rope.freq_base`, 10000, "f32"],
    [`${a}.vocab_size`, o.nVocab, "u32"],
  ];
  if (known && a === "qwen3moe") {
    md.push(
      [`${a}.expert_count`, o.nExpert, "u32"],
      [`${a}.expert_used_count`, o.nExpertUsed, "u32"],
      [`${a}.expert_feed_forward_length`, o.nFfExp, "u32"],
    );
  }
  if (o.weightType !== "f32") md.push(["general.quantization_version", 2, "u32"]);
  return md;
}

// ---- tensors ----

function tensors(o: Resolved): GgufTensorInput[] {
  const { nEmbd: E, nVocab: V, nFf: F, headDim: D, nHead: H, nHeadKv: HKV, nExpert: X, nFfExp: FX } = o;
  const out: GgufTensorInput[] = [];
  const weight = (name: string, shape: number[], std: number) => out.push(matrix(o, name, shape, std));
  const norm = (name: string, n: number) =>
    out.push(f32Tensor(name, [n], gaussian(o.seed, name, n, NORM_JITTER, 1)));
  const gainNorm = (name: string, n: number, g: number) =>
    out.push(f32Tensor(name, [n], gaussian(o.seed, name, n, NORM_JITTER * g, g)));
  const bias = (name: string, n: number) =>
    out.push(f32Tensor(name, [n], gaussian(o.seed, name, n, BIAS_STD, 0)));
  const inv = (n: number) => 1 / Math.sqrt(n);

  weight("token_embd.weight", [E, V], EMBD_STD);
  for (let i = 0; i < o.nLayer; i++) {
    const p = `blk.${i}.`;
    norm(`${p}attn_norm.weight`, E);
    weight(`${p}attn_q.weight`, [E, D * H], ATTN_GAIN * inv(E));
    weight(`${p}attn_k.weight`, [E, D * HKV], ATTN_GAIN * inv(E));
    weight(`${p}attn_v.weight`, [E, D * HKV], inv(E));
    if (o.arch === "qwen2") {
      bias(`${p}attn_q.bias`, D * H);
      bias(`${p}attn_k.bias`, D * HKV);
      bias(`${p}attn_v.bias`, D * HKV);
    }
    weight(`${p}attn_output.weight`, [D * H, E], inv(D * H));
    if (o.arch === "qwen3" || o.arch === "qwen3moe") {
      gainNorm(`${p}attn_q_norm.weight`, D, ATTN_GAIN);
      gainNorm(`${p}attn_k_norm.weight`, D, ATTN_GAIN);
    }
    norm(`${p}ffn_norm.weight`, E);
    if (o.arch === "qwen3moe") {
      // the router stays f32, as llama.cpp's quantizer leaves it
      out.push(
        f32Tensor(
          `${p}ffn_gate_inp.weight`,
          [E, X],
          gaussian(o.seed, `${p}ffn_gate_inp.weight`, E * X, inv(E), 0),
        ),
      );
      weight(`${p}ffn_gate_exps.weight`, [E, FX, X], inv(E));
      weight(`${p}ffn_up_exps.weight`, [E, FX, X], inv(E));
      weight(`${p}ffn_down_exps.weight`, [FX, E, X], inv(FX));
    } else {
      weight(`${p}ffn_gate.weight`, [E, F], inv(E));
      weight(`${p}ffn_up.weight`, [E, F], inv(E));
      weight(`${p}ffn_down.weight`, [F, E], inv(F));
    }
  }
  if (o.tiedEmbeddings) {
    // the head is token_embd itself: the final norm's gain brings the logits to LOGIT_STD
    const gain = LOGIT_STD / (EMBD_STD * Math.sqrt(E));
    out.push(
      f32Tensor(
        "output_norm.weight",
        [E],
        gaussian(o.seed, "output_norm.weight", E, NORM_JITTER * gain, gain),
      ),
    );
  } else {
    norm("output_norm.weight", E);
    weight("output.weight", [E, V], LOGIT_STD * inv(E));
  }
  return out;
}

function matrix(o: Resolved, name: string, shape: number[], std: number): GgufTensorInput {
  const n = shape.reduce((a, b) => a * b, 1);
  const values = gaussian(o.seed, name, n, std, 0);
  switch (o.weightType) {
    case "f32":
      return f32Tensor(name, shape, values);
    case "f16":
      return { name, shape, type: GgmlType.F16, data: toF16(values) };
    case "q8_0":
      if (shape[0] % 32 !== 0) {
        throw new RangeError(`q8_0 needs rows that are a multiple of 32: '${name}' has ${shape[0]}`);
      }
      return { name, shape, type: GgmlType.Q8_0, data: toQ8_0(values) };
  }
}

function f32Tensor(name: string, shape: number[], values: Float32Array): GgufTensorInput {
  return {
    name,
    shape,
    type: GgmlType.F32,
    data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength),
  };
}
