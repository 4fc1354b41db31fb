// Run by kv-memory.test.ts under Deno: the KV bytes llama.cpp allocates for a range (the C
// API reads them from the cache itself) beside what Strata estimates from the header before
// loading anything, for a model with sliding-window layers (Gemma 3) and one without.
// Prints one JSON object.
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { resolveModel } from "../../server/model/fetch.ts";
import { readHeader } from "../../server/model/facts.ts";
import { headerModel, specMemory } from "../../src/engine/memory-fit.ts";
import type { ShardSpec } from "../../src/engine/range-engine.ts";
import { layerRange } from "../../src/engine/layer-range.ts";

const rows = [];
for (const [name, cut] of [["gemma3-270m", 9], ["smollm2", 12]] as const) {
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
          model: name,
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
