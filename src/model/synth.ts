// Tiny random-weight GGUF models that llama.cpp loads and runs, for tests that need a real
// model in milliseconds. Weights come from a seeded PRNG using only exact IEEE arithmetic
// (no Math.log/cos), so the same options give the same bytes, and the same artifact sha256,
// in every JS engine: a browser tab and a Deno node can each synthesize the same artifact.

import { type GgufTensorInput, type MetadataEntry, writeGguf } from "../gguf/writer.ts";
import { GgmlType } from "../gguf/types.ts";

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
const SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;
const CHATML_TEMPLATE = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + " +
  "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

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

// ---- seeded numbers ----

/** mulberry32: a 32-bit state PRNG, uniform in [0, 1). */
function mulberry32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a of the tensor name mixed with the seed: each tensor has its own stream, so
 *  tied and untied models (or different layer counts) share the weights they have in common. */
function streamSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ Math.imul(seed | 0, 0x9e3779b1);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

const SQRT3 = 1.7320508075688772;

/** n values of mean + std·z, z ~ Irwin–Hall(4) rescaled to unit variance (bounded, near normal). */
function gaussian(seed: number, name: string, n: number, std: number, mean: number): Float32Array {
  const rand = mulberry32(streamSeed(seed, name));
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = mean + std * ((rand() + rand() + rand() + rand() - 2) * SQRT3);
  return out;
}

// ---- ggml encodings ----

const f32 = new Float32Array(1);
const f32Bits = new Uint32Array(f32.buffer);

/** IEEE half from a float, round to nearest even (as ggml's GGML_FP32_TO_FP16). */
function halfBits(v: number): number {
  f32[0] = v;
  const x = f32Bits[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 112; // rebias 127 → 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1), mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++; // a carry into the exponent is still correct
  return sign | h;
}

function toF16(values: Float32Array): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  const view = new DataView(out.buffer);
  for (let i = 0; i < values.length; i++) view.setUint16(i * 2, halfBits(values[i]), true);
  return out;
}

/** Q8_0 blocks of 32: an f16 scale d = max|x|/127, then 32 int8 round(x/d) (ggml's reference quantizer). */
function toQ8_0(values: Float32Array): Uint8Array {
  const nBlocks = values.length / 32;
  const out = new Uint8Array(nBlocks * 34);
  const view = new DataView(out.buffer);
  for (let b = 0; b < nBlocks; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(values[b * 32 + j]));
    const d = amax / 127;
    const id = d ? 1 / d : 0;
    view.setUint16(b * 34, halfBits(d), true);
    for (let j = 0; j < 32; j++) {
      const x = values[b * 32 + j] * id;
      view.setInt8(b * 34 + 2 + j, Math.sign(x) * Math.round(Math.abs(x))); // roundf: halves away from zero
    }
  }
  return out;
}

// ---- tokenizer ----

function vocabMetadata(o: Resolved): MetadataEntry[] {
  const { tokens, types, merges } = synthVocab(o.nVocab);
  return [
    ["tokenizer.ggml.model", "gpt2", "string"],
    ["tokenizer.ggml.pre", "default", "string"],
    ["tokenizer.ggml.tokens", tokens, { array: "string" }],
    ["tokenizer.ggml.token_type", types, { array: "i32" }],
    ["tokenizer.ggml.merges", merges, { array: "string" }],
    ["tokenizer.ggml.bos_token_id", 1, "u32"],
    ["tokenizer.ggml.eos_token_id", 2, "u32"],
    ["tokenizer.ggml.padding_token_id", 0, "u32"],
    ["tokenizer.ggml.add_bos_token", o.arch === "llama", "bool"],
    ["tokenizer.chat_template", CHATML_TEMPLATE, "string"],
  ];
}

/** GPT-2's reversible byte → printable character map, so every byte is a token. */
function byteChars(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const chars = new Array<string>(256);
  for (const b of printable) chars[b] = String.fromCodePoint(b);
  let extra = 0;
  for (let b = 0; b < 256; b++) if (chars[b] === undefined) chars[b] = String.fromCodePoint(256 + extra++);
  return chars;
}

// Words whose prefixes become merges, so English text tokenizes into a few tokens per word.
const WORDS =
  ("the of and to in is you that it he was for on are as with his they at be this have from or one had " +
    "by word but not what all were we when your can said there use an each which she do how their if will up other " +
    "about out many then them these so some her would make like him into time has look two more write go see number " +
    "no way could people my than first water been call who oil its now find long down day did get come made may part " +
    "capital france paris city country language model hello world").split(" ");

/** Token ids: 0..2 special, 3..258 the 256 bytes, then merges of word prefixes (" t", " th", " the", ...). */
function synthVocab(nVocab: number): { tokens: string[]; types: number[]; merges: string[] } {
  const NORMAL = 1, CONTROL = 3, USER_DEFINED = 4;
  const chars = byteChars();
  const tokens: string[] = [...SPECIAL_TOKENS, ...chars];
  const types: number[] = [...SPECIAL_TOKENS.map(() => CONTROL), ...chars.map(() => NORMAL)];
  const merges: string[] = [];
  const known = new Set(tokens);
  const space = chars[0x20];
  outer: for (const word of WORDS) {
    let left = space;
    for (const ch of word) {
      if (tokens.length >= nVocab) break outer;
      const merged = left + ch;
      if (!known.has(merged)) {
        known.add(merged);
        tokens.push(merged);
        types.push(NORMAL);
        merges.push(`${left} ${ch}`);
      }
      left = merged;
    }
  }
  for (let i = 0; tokens.length < nVocab; i++) {
    tokens.push(`<|extra_${i}|>`);
    types.push(USER_DEFINED);
  }
  return { tokens, types, merges };
}
