// Run by kv-memory.test.ts under Deno: the KV bytes llama.cpp allocates for a range (the C
// API reads them from the cache itself) beside what Strata estimates from the header before
// loading anything: sliding-window layers (Gemma 3), grouped-query attention (SmolLM2),
// latent attention's K-only cache (DeepSeek-V2), nextn layers (GLM-4.5 MoE), the indexer keys of
// sparse attention's full layers (glm-dsa, DeepSeek-V3.2), DeepSeek-V4's compressed caches and
// compressor state, one stream per sequence.
// Prints one JSON object.
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { resolveModel } from "../../server/model/fetch.ts";
import { readHeader } from "../../server/model/facts.ts";
import { headerModel, specMemory } from "../../src/engine/memory-cap.ts";
import type { ShardSpec } from "../../src/engine/range-engine.ts";
import { layerRange } from "../../src/engine/layer-range.ts";
import { synthModel } from "../../src/model/synth.ts";

const dir = Deno.makeTempDirSync();
for (const arch of ["deepseek2", "glm4moe", "glm-dsa", "deepseek32", "deepseek4"]) {
  Deno.writeFileSync(`${dir}/${arch}.gguf`, synthModel({ arch, seed: 3 }));
}
const models = [
  ["gemma3-270m", 9],
  ["smollm2", 12],
  [`${dir}/deepseek2.gguf`, 3],
  [`${dir}/glm4moe.gguf`, 3],
  [`${dir}/glm-dsa.gguf`, 3],
  [`${dir}/deepseek32.gguf`, 3],
  [`${dir}/deepseek4.gguf`, 3],
] as const;

const rows = [];
for (const [name, cut] of models) {
  const { path } = await resolveModel(name);
  const model = headerModel(await readHeader(path), (await Deno.stat(path)).size);
  const n = model.manifest.nLayer;
  for (const range of ["whole", layerRange(0, cut), layerRange(cut, n)] as const) {
    for (const batchInvariant of [true, false]) {
      const spec: ShardSpec = {
        modelPath: path,
        range,
        kvCells: 4096,
        maxSequences: 4,
        batchTokens: 256,
        threads: 1,
        batchInvariant,
      };
      const engine = await NativeEngine.load(spec);
      try {
        rows.push({
          model: name.split("/").pop(),
          range: range === "whole" ? "whole" : `${range.start}:${range.end}`,
          batchInvariant,
          allocated: (await engine.memory()).kvBytes,
          estimated: specMemory(model, spec, true).kvBytes,
        });
      } finally {
        await engine.close();
      }
    }
  }
}
console.log(JSON.stringify(rows));
