// Synthetic models of a given file size, shaped like a real model of that size: the published
// llama-family shape whose canonical file in the chosen weight type is nearest the size, then its
// depth, feed-forward width and vocabulary adjusted (in that order) to land on the size.

import { type SynthOptions, synthSize, type SynthWeightType } from "./synth.ts";

/** A published model's shape, which synthModelForSize scales. */
export interface SizeFamily {
  readonly like: string;
  readonly nLayer: number;
  readonly nEmbd: number;
  readonly nHead: number;
  readonly nHeadKv: number;
  readonly nFf: number;
  readonly nVocab: number;
}

/** Llama-architecture shapes from 15M to 13B parameters (head width nEmbd / nHead). The
 *  synthetic ones have an output head of their own even where the original ties it. */
export const SIZE_FAMILIES: readonly SizeFamily[] = [
  { like: "llama2.c stories15M", nLayer: 6, nEmbd: 288, nHead: 6, nHeadKv: 6, nFf: 768, nVocab: 32000 },
  { like: "llama2.c stories42M", nLayer: 8, nEmbd: 512, nHead: 8, nHeadKv: 8, nFf: 1376, nVocab: 32000 },
  { like: "SmolLM2-135M", nLayer: 30, nEmbd: 576, nHead: 9, nHeadKv: 3, nFf: 1536, nVocab: 49152 },
  { like: "SmolLM2-360M", nLayer: 32, nEmbd: 960, nHead: 15, nHeadKv: 5, nFf: 2560, nVocab: 49152 },
  { like: "TinyLlama-1.1B", nLayer: 22, nEmbd: 2048, nHead: 32, nHeadKv: 4, nFf: 5632, nVocab: 32000 },
  { like: "Llama-3.2-1B", nLayer: 16, nEmbd: 2048, nHead: 32, nHeadKv: 8, nFf: 8192, nVocab: 128256 },
  { like: "Llama-3.2-3B", nLayer: 28, nEmbd: 3072, nHead: 24, nHeadKv: 8, nFf: 8192, nVocab: 128256 },
  { like: "Llama-2-7B", nLayer: 32, nEmbd: 4096, nHead: 32, nHeadKv: 32, nFf: 11008, nVocab: 32000 },
  { like: "Llama-3.1-8B", nLayer: 32, nEmbd: 4096, nHead: 32, nHeadKv: 8, nFf: 14336, nVocab: 128256 },
  { like: "Llama-2-13B", nLayer: 40, nEmbd: 5120, nHead: 40, nHeadKv: 40, nFf: 13824, nVocab: 32000 },
];

/** Architectures --size can shape (the dense ones). */
export const SIZE_ARCHS = ["llama", "qwen2", "qwen3"] as const;

/** Acceptable relative distance from the asked size. */
export const SIZE_TOLERANCE = 0.02;
const EMBD_PER_SQRT_LAYER = 0.5;
const SUCCESSOR = 16;
const MIN_VOCAB = 512; // the byte vocabulary (259) and some merges

/** What the caller fixes; the rest comes from the family and the size. */
export type SizeOverrides = Pick<
  SynthOptions,
  | "seed"
  | "nLayer"
  | "nEmbd"
  | "nHead"
  | "nHeadKv"
  | "nFf"
  | "nVocab"
  | "nCtx"
  | "weightType"
  | "tiedEmbeddings"
>;

export interface SizedModel {
  /** Complete options for synthFile / synthModel. */
  readonly options: SynthOptions & {
    readonly nLayer: number;
    readonly nEmbd: number;
    readonly nHead: number;
    readonly nHeadKv: number;
    readonly nFf: number;
    readonly nVocab: number;
    readonly weightType: SynthWeightType;
    readonly tiedEmbeddings: boolean;
  };
  /** The published model the shape follows. */
  readonly like: string;
  readonly parameters: number;
  readonly fileBytes: number;
}

/** Options for a synthetic arch model whose file is within SIZE_TOLERANCE of targetBytes. Its
 *  weights take one PRNG draw each (draws: 1): a GB in seconds. Throws a RangeError when the
 *  overrides leave no shape that size. */
export function synthModelForSize(arch: string, targetBytes: number, fixed: SizeOverrides = {}): SizedModel {
  if (!(SIZE_ARCHS as readonly string[]).includes(arch)) {
    throw new RangeError(`--size shapes ${SIZE_ARCHS.join(", ")} models, not ${arch}`);
  }
  if (!(targetBytes > 0)) throw new RangeError(`size must be positive, got ${targetBytes}`);
  const weightType = fixed.weightType ?? "q8_0";

  // the family from the given width, else from its canonical file in this type
  const canonical = (f: SizeFamily) => bytes(familyOptions(arch, f, weightType, fixed, true));
  const family = argMin(
    SIZE_FAMILIES,
    (f) =>
      fixed.nEmbd !== undefined
        ? Math.abs(Math.log(f.nEmbd / fixed.nEmbd))
        : Math.abs(Math.log(targetBytes / canonical(f))),
  );
  let o = familyOptions(arch, family, weightType, fixed, false);

  // a smaller file than the family's keeps its share of embeddings: a smaller vocabulary
  const canon = canonical(family);
  if (fixed.nVocab === undefined && targetBytes < canon) {
    o = { ...o, nVocab: Math.max(MIN_VOCAB, Math.round((o.nVocab * targetBytes) / canon)) };
  }

  // depth: the file scales with layers, and the width takes the rest, so each moves by about
  // the square root of the ratio (all of it when the width is fixed)
  if (fixed.nLayer === undefined) {
    const empty = bytes({ ...o, nLayer: 0 });
    const perLayer = bytes({ ...o, nLayer: 1 }) - empty;
    const ratio = Math.max(0, targetBytes - empty) / (perLayer * o.nLayer);
    const scale = fixed.nFf === undefined ? Math.sqrt(ratio) : ratio;
    o = { ...o, nLayer: clamp(Math.round(o.nLayer * scale), 1, 4 * o.nLayer) };
  }
  // feed-forward width, in steps of 256 (32 for narrow models)
  if (fixed.nFf === undefined) {
    const step = o.nFf >= 2048 ? 256 : 32;
    const at0 = bytes({ ...o, nFf: step });
    const perStep = bytes({ ...o, nFf: 2 * step }) - at0;
    const steps = Math.round((targetBytes - at0) / perStep) + 1;
    o = { ...o, nFf: clamp(steps, Math.ceil(o.nEmbd / 2 / step), Math.ceil((4 * o.nFf) / step)) * step };
  }
  // vocabulary, to the token (twice: the token list is in the header)
  if (fixed.nVocab === undefined) {
    for (let i = 0; i < 2; i++) {
      const now = bytes(o);
      const perToken = (bytes({ ...o, nVocab: o.nVocab + 1000 }) - now) / 1000;
      o = { ...o, nVocab: Math.max(MIN_VOCAB, o.nVocab + Math.round((targetBytes - now) / perToken)) };
    }
  }
  if (!o.tiedEmbeddings) {
    // decisive greedy decoding: the final hidden state keeps a good share of the last token's
    // embedding (the layers add about √layers to the residual stream), and the head's successor
    // term turns that into a clear lead for the token after it
    o = { ...o, embdStd: EMBD_PER_SQRT_LAYER * Math.sqrt(o.nLayer), successor: SUCCESSOR };
  }
  const file = synthSize(o);
  if (Math.abs(file.fileBytes - targetBytes) > SIZE_TOLERANCE * targetBytes) {
    throw new RangeError(
      `no ${arch} model like ${family.like} with the given shape comes within ${SIZE_TOLERANCE * 100}% of ` +
        `${targetBytes} bytes (the nearest is ${file.fileBytes})`,
    );
  }
  return { options: o, like: family.like, parameters: file.parameters, fileBytes: file.fileBytes };
}

function familyOptions(
  arch: string,
  f: SizeFamily,
  weightType: SynthWeightType,
  fixed: SizeOverrides,
  canonical: boolean,
): SizedModel["options"] {
  const nEmbd = canonical ? f.nEmbd : fixed.nEmbd ?? f.nEmbd;
  const headDim = f.nEmbd / f.nHead;
  const nHead = canonical ? f.nHead : fixed.nHead ?? (nEmbd % headDim === 0 ? nEmbd / headDim : f.nHead);
  const group = f.nHead / f.nHeadKv;
  const nHeadKv = canonical
    ? f.nHeadKv
    : fixed.nHeadKv ?? (fixed.nHead !== undefined ? nHead : nHead % group === 0 ? nHead / group : nHead);
  return {
    arch,
    seed: fixed.seed,
    nCtx: fixed.nCtx ?? 4096,
    nEmbd,
    nHead,
    nHeadKv,
    nLayer: canonical ? f.nLayer : fixed.nLayer ?? f.nLayer,
    nFf: canonical ? f.nFf : fixed.nFf ?? f.nFf,
    nVocab: canonical ? f.nVocab : fixed.nVocab ?? f.nVocab,
    tiedEmbeddings: canonical ? false : fixed.tiedEmbeddings ?? false,
    weightType,
    draws: 1,
  };
}

/** File size without drawing a weight; nLayer 0 counts the layer-free part. */
function bytes(o: SizedModel["options"]): number {
  if (o.nLayer > 0) return synthSize(o).fileBytes;
  return 2 * synthSize({ ...o, nLayer: 1 }).fileBytes - synthSize({ ...o, nLayer: 2 }).fileBytes;
}

function argMin<T>(items: readonly T[], f: (t: T) => number): T {
  let best = items[0], bestScore = f(best);
  for (const t of items.slice(1)) {
    const s = f(t);
    if (s < bestScore) [best, bestScore] = [t, s];
  }
  return best;
}

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

/** One line per fact, for the CLI. */
export function describeSized(m: SizedModel): string {
  const o = m.options;
  const params = m.parameters >= 1e9
    ? `${(m.parameters / 1e9).toFixed(2)}B`
    : `${(m.parameters / 1e6).toFixed(1)}M`;
  return [
    `shape like ${m.like}: ${o.nLayer} layers, n_embd ${o.nEmbd}, n_ff ${o.nFf}, ` +
    `${o.nHead} heads, ${o.nHeadKv} kv heads, vocab ${o.nVocab}, ${o.weightType}` +
    `${o.tiedEmbeddings ? ", tied embeddings" : ""}`,
    `${params} parameters (${m.parameters}), ${m.fileBytes} bytes`,
  ].join("\n");
}
