// Resident memory of each shard process against the whole model in a process of its
// own, after a prefill and a few decode steps (so every weight the shard owns has been
// touched). Prints figures; asserts nothing.
import { parseSplit } from "../../src/engine/layer-range.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { fileFacts } from "../../server/model/facts.ts";
import { type EngineHostLoad, EngineProcess } from "../engine-host/engine-process.ts";

const MB = 2 ** 20;

export async function benchShardMemory(
  path: string,
  name: string,
  splitText: string,
  backend: NativeBackend,
) {
  const facts = await fileFacts(path);
  const split = parseSplit(splitText, facts.nLayer);
  const base: Omit<EngineHostLoad, "range"> = {
    modelPath: path,
    kvCells: 512,
    maxSequences: 1,
    batchTokens: 64,
    threads: 2,
    backend,
  };
  const bare = EngineProcess.bare();
  const runtimeRss = (await bare.memory()).rss;
  await bare.close();

  // one process at a time, so that they do not compete for memory or cores
  const touch = async (p: EngineProcess, input: Int32Array | Float32Array, n: number) => {
    const seq = await p.open();
    // as in real prefill: the last shard returns logits of the last token only
    const outputs = new Uint8Array(n);
    outputs[n - 1] = 1;
    const out = await p.decode(
      input,
      Int32Array.from({ length: n }, (_, i) => i),
      new Int32Array(n).fill(seq),
      outputs,
    );
    return out.data;
  };
  const whole = await EngineProcess.spawn({ ...base, range: "whole" });
  const prompt = Int32Array.from({ length: 32 }, (_, i) => (i * 977) % whole.facts.nVocab);
  await touch(whole, prompt, prompt.length);
  const wholeRss = (await whole.memory()).rss;
  const wholeWeights = whole.facts.weightBytes;
  await whole.close();

  const shards = [];
  let hidden: Int32Array | Float32Array = prompt;
  for (const range of split) {
    const p = await EngineProcess.spawn({ ...base, range });
    hidden = await touch(p, hidden, prompt.length);
    const rss = (await p.memory()).rss;
    shards.push({
      range: `${range.start}:${range.end}`,
      rss_mb: rss / MB,
      weights_mb: p.facts.weightBytes / MB,
      vs_whole: rss / wholeRss,
      // the engine's own share: what the process holds beyond a bare runtime
      engine_vs_whole: (rss - runtimeRss) / (wholeRss - runtimeRss),
    });
    await p.close();
  }
  const result = {
    model: name,
    backend: `native-${backend}`,
    file_mb: (await Deno.stat(path)).size / MB,
    runtime_rss_mb: runtimeRss / MB,
    whole: { rss_mb: wholeRss / MB, weights_mb: wholeWeights / MB },
    shards,
    target_vs_whole: 0.65,
  };
  const rows = shards.map((s) =>
    `  shard ${s.range.padEnd(6)} rss ${s.rss_mb.toFixed(1).padStart(6)} MB  weights ${
      s.weights_mb.toFixed(1).padStart(6)
    } MB  ${s.vs_whole.toFixed(2)}× whole (engine share ${s.engine_vs_whole.toFixed(2)}×)`
  );
  const table = [
    `${name} on native-${backend} (file ${result.file_mb.toFixed(1)} MB; a bare Deno process: ${
      result.runtime_rss_mb.toFixed(1)
    } MB)`,
    `  whole        rss ${result.whole.rss_mb.toFixed(1).padStart(6)} MB  weights ${
      result.whole.weights_mb.toFixed(1).padStart(6)
    } MB`,
    ...rows,
    `  target: each shard ≤ ${result.target_vs_whole}× the whole model's RSS`,
  ].join("\n");
  return { ...result, table };
}
