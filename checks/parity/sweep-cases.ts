// The parity sweep's cases (`strata bench parity`): both catalog models and a synthetic model of
// every architecture the suite's parity file covered, each split in 2 and in 3 shards, and the
// splits an architecture refuses. test/integration/parity.test.ts keeps one of them per
// architecture; this list is the rest of what it used to run, and those kept cases too.
import type { SynthOptions } from "../../src/model/synth.ts";

/** A catalog model by name, or a synthetic model written with `synth`. */
export interface SweepModel {
  readonly name: string;
  readonly synth?: SynthOptions;
}

export interface SweepCase {
  readonly model: SweepModel;
  readonly split: string;
  /** each prompt at least this long (`strata parity --prompt-tokens`) */
  readonly promptTokens?: number;
  /** the split is refused before anything loads, and its reason says this */
  readonly refused?: string;
  /** floats of one token's hidden state at a seam */
  readonly seamWidth?: number;
  /** the first session's route output says this */
  readonly text?: string;
}

/** the seed `strata model synth --seed 11` wrote the suite's synthetic models with */
const SEED = 11;
const synthetic = (arch: string): SweepModel => ({ name: `synthetic ${arch}`, synth: { arch, seed: SEED } });

const SMOLLM2: SweepModel = { name: "smollm2" };
const GEMMA3_270M: SweepModel = { name: "gemma3-270m" };
const GLM_DSA = synthetic("glm-dsa");
/** full indexer layers at 0, 2 and 4 (the default seed: as the suite wrote it) */
const GLM_DSA_EVERY_2: SweepModel = {
  name: "synthetic glm-dsa, indexer every 2",
  synth: { arch: "glm-dsa", indexerEvery: 2 },
};
const DEEPSEEK4 = synthetic("deepseek4");

/** Architectures that cut anywhere, at the same two splits of their 6 layers. */
export const PLAIN_ARCHS = ["llama", "qwen3", "qwen3moe", "gemma3", "deepseek2", "glm4moe", "deepseek32"];

export const PARITY_SWEEP: readonly SweepCase[] = [
  { model: SMOLLM2, split: "0:12,12:30", text: "Paris" },
  { model: SMOLLM2, split: "0:10,10:20,20:30" },
  // past the 512-token sliding window
  { model: GEMMA3_270M, split: "0:9,9:18", promptTokens: 600 },
  { model: GEMMA3_270M, split: "0:5,5:12,12:18" },
  // full indexer layers 0 and 3
  { model: GLM_DSA, split: "0:3,3:6" },
  {
    model: GLM_DSA,
    split: "0:1,1:4,4:6",
    refused: "no range may start at layer 1: a shared-indexer layer reuses the top-k",
  },
  { model: GLM_DSA_EVERY_2, split: "0:2,2:4,4:6" },
  // past a 128-token compression; the seam carries the whole residual: 4 streams of n_embd 64
  { model: DEEPSEEK4, split: "0:3,3:6", promptTokens: 160, seamWidth: 256 },
  { model: DEEPSEEK4, split: "0:2,2:4,4:6" },
  // layers 0 and 1 route by token id
  {
    model: DEEPSEEK4,
    split: "0:1,1:4,4:6",
    refused: "no range may start at layer 1: a hash-routed layer picks its experts by token id",
  },
  ...PLAIN_ARCHS.flatMap((arch) => [
    { model: synthetic(arch), split: "0:3,3:6" },
    { model: synthetic(arch), split: "0:1,1:4,4:6" },
  ]),
];

/** The cases of the named models only (a catalog name, or a synthetic model's architecture). */
export function sweepCases(only?: readonly string[]): SweepCase[] {
  if (!only?.length) return [...PARITY_SWEEP];
  const picked = PARITY_SWEEP.filter((c) => only.includes(c.model.synth?.arch ?? c.model.name));
  const known = new Set(PARITY_SWEEP.map((c) => c.model.synth?.arch ?? c.model.name));
  const unknown = only.filter((m) => !known.has(m));
  if (unknown.length) {
    throw new Error(`the parity sweep has no model ${unknown.join(", ")} (it has ${[...known].join(", ")})`);
  }
  return picked;
}
