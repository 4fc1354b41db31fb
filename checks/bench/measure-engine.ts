// One engine process holding the whole model (native llama.cpp from the pin, or the WASM
// engine): the baseline every route is compared with.
import { top2 } from "../../src/parity/compare.ts";
import type { HostBackend } from "../engine-host/engine-host.ts";
import { EngineProcess } from "../engine-host/engine-process.ts";
import { type EngineFigures, figures } from "./figures.ts";
import { prompt } from "./route-throughput.ts";

export async function measureWhole(
  o: {
    modelPath: string;
    backend: HostBackend;
    threads: number;
    promptTokens: number;
    decodeTokens: number;
  },
): Promise<EngineFigures & { engine: string }> {
  const p = await EngineProcess.spawn({
    modelPath: o.modelPath,
    range: "whole",
    kvCells: 1024,
    maxSequences: 1,
    batchTokens: 512,
    threads: o.threads,
    backend: o.backend,
  });
  try {
    const one = Uint8Array.of(1);
    const run = async (tokens: Int32Array, steps: number) => {
      const seq = await p.open();
      const n = tokens.length;
      const t0 = performance.now();
      let r = await p.decode(
        tokens,
        Int32Array.from({ length: n }, (_, i) => i),
        new Int32Array(n).fill(seq),
        Uint8Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0)),
      );
      const ttft = performance.now() - t0;
      const stepMs: number[] = [];
      for (let i = 0; i < steps; i++) {
        const t = performance.now();
        r = await p.decode(Int32Array.of(top2(r.data).best), Int32Array.of(n + i), Int32Array.of(seq), one);
        stepMs.push(performance.now() - t);
      }
      await p.release(seq);
      return { ttft, stepMs };
    };
    // warm-up as long as the measurement: first-use allocations, and (WASM, seams) JIT tiers
    await run(prompt(16, 99), o.decodeTokens);
    const { ttft, stepMs } = await run(prompt(o.promptTokens, 0), o.decodeTokens);
    const { rss } = await p.memory();
    return { engine: p.engineBackend, ...figures(o.promptTokens, ttft, stepMs, rss) };
  } finally {
    await p.close();
  }
}
