// A small synthetic model as a tracker knows it (its manifest and KV shape), for placement tests.
import { buildManifest } from "../../src/gguf/manifest.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { synthModel } from "../../src/model/synth.ts";

export function trackedModel(artifact: string, nLayer = 6) {
  const file = synthModel({ arch: "qwen3", nLayer });
  const header = parseGgufHeader(file);
  const shape = kvShape(header);
  return {
    artifact,
    nLayer: shape.nLayer,
    manifest: buildManifest(header, file.length, artifact),
    kv: shape.layers,
  };
}
