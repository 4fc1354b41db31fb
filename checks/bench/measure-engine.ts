// One engine process holding the whole model (native llama.cpp from the pin, or the WASM
// engine): the baseline every route is compared with.
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
  const p = await spawnWhole(o);
  try {
    // warm-up as long as the measurement: first-use allocations, and (WASM, seams) JIT tiers
    await wholeSession(p, prompt(16, 99), o.decodeTokens);
    const { ttft, stepMs } = await wholeSession(p, prompt(o.promptTokens, 0), o.decodeTokens);
    const { rss } = await p.memory();
    return { engine: p.engineBackend, ...figures(o.promptTokens, ttft, stepMs, rss) };
  } finally {
    await p.close();
  }
}

/** A whole-model process for one session at a time. */
export function spawnWhole(o: { modelPath: string; backend: HostBackend; threads: number }) {
  return EngineProcess.spawn({
    modelPath: o.modelPath,
    range: "whole",
    kvCells: 1024,
    maxSequences: 1,
    batchTokens: 512,
    threads: o.threads,
    backend: o.backend,
  });
}

/**
 * One session on a whole-model process: the prompt in one batch, then `steps` greedy decode
 * steps; its greedy tokens (the prompt's, then each step's). Every time is the shard process's
 * own (engine and greedy pick): one process holding the whole model pays no pipe, so neither
 * does its baseline.
 */
export async function wholeSession(p: EngineProcess, promptIds: Int32Array, steps: number) {
  const seq = await p.open();
  const n = promptIds.length;
  const first = await p.decodeGreedy(
    promptIds,
    Int32Array.from({ length: n }, (_, i) => i),
    new Int32Array(n).fill(seq),
    Uint8Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0)),
  );
  const one = Uint8Array.of(1);
  const stepMs: number[] = [];
  const tokens = [first.tokens[0]];
  for (let i = 0; i < steps; i++) {
    const r = await p.decodeGreedy(Int32Array.of(tokens[i]), Int32Array.of(n + i), Int32Array.of(seq), one);
    stepMs.push(r.ms);
    tokens.push(r.tokens[0]);
  }
  await p.release(seq);
  return { ttft: first.ms, stepMs, tokens };
}
