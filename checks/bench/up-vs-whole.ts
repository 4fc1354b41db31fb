// TTFT and decode tokens/s seen by a client of `strata up` (SSE through the gateway, a
// route of node processes) beside whole-model llama.cpp in one process, same prompts, same
// greedy tokens. Prints figures; asserts nothing.
import type { Tokenizer } from "../../src/engine/tokenizer.ts";
import { timedChat } from "./timed-chat.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { PARITY_QUESTIONS, parityPrompts } from "../parity/prompts.ts";
import { EngineProcess } from "../engine-host/engine-process.ts";
import { up } from "../../server/up/up.ts";
import type { LayerRange } from "../../src/engine/layer-range.ts";

export interface UpBenchOptions {
  readonly model: string;
  readonly modelPath: string;
  readonly split: LayerRange[];
  readonly backend: NativeBackend;
  readonly threads: number;
  readonly newTokens: number;
  readonly prompts: number;
  readonly tokenizer: Tokenizer;
  /** the whole model's threads (default: as many as the route's nodes together) */
  readonly wholeThreads?: number;
}

interface Timing {
  ttftMs: number;
  decodeTokPerS: number;
  tokens: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function benchUp(o: UpBenchOptions) {
  const texts = parityPrompts(o.tokenizer, o.prompts);
  const whole = await wholeModel(o, texts);
  const dir = await Deno.makeTempDir();
  const net = await up({
    model: o.model,
    split: o.split,
    routes: 1,
    backend: o.backend,
    threads: o.threads,
    gatewayListen: "127.0.0.1:0",
    apiKeys: [],
    leaseMs: 5000,
    dbPath: `${dir}/tracker.db`,
  });
  const route: Timing[] = [];
  try {
    await streamed(net.gateway, "Hello", 4); // warm-up
    for (let i = 0; i < o.prompts; i++) {
      route.push(await streamed(net.gateway, PARITY_QUESTIONS[i % PARITY_QUESTIONS.length], o.newTokens));
    }
  } finally {
    await net.stop();
    await Deno.remove(dir, { recursive: true });
  }
  const summary = (t: Timing[]) => ({
    ttft_ms_p50: median(t.map((x) => x.ttftMs)),
    decode_tok_s_p50: median(t.map((x) => x.decodeTokPerS)),
    tokens: t.map((x) => x.tokens),
  });
  const w = summary(whole);
  const r = summary(route);
  return {
    split: o.split.map((s) => `${s.start}:${s.end}`).join(","),
    threads_per_node: o.threads,
    whole_model_threads: o.wholeThreads ?? o.threads * o.split.length,
    whole: w,
    strata_up: r,
    ttft_ratio: r.ttft_ms_p50 / w.ttft_ms_p50,
    decode_ratio: r.decode_tok_s_p50 / w.decode_tok_s_p50,
  };
}

async function streamed(gateway: string, question: string, newTokens: number): Promise<Timing> {
  const c = await timedChat(gateway, question, newTokens);
  const n = c.at.length;
  return { ttftMs: c.ttftMs, decodeTokPerS: (n - 1) / ((c.at[n - 1] - c.at[0]) / 1000), tokens: n };
}

/** Whole-model llama.cpp: the same chat prompts, greedy until end of generation or newTokens. */
async function wholeModel(o: UpBenchOptions, prompts: Int32Array[]): Promise<Timing[]> {
  const p = await EngineProcess.spawn({
    modelPath: o.modelPath,
    range: "whole",
    kvCells: 2048,
    maxSequences: 1,
    batchTokens: 512,
    threads: o.wholeThreads ?? o.threads * o.split.length,
    backend: o.backend,
  });
  try {
    const out: Timing[] = [];
    for (const prompt of prompts) {
      const seq = await p.open();
      // the shard process's own times (engine and greedy pick): the pipe to it is not the model's
      let input = prompt;
      let at = 0;
      let ttft = 0;
      let decodeMs = 0;
      let n = 0;
      for (let i = 0; i < o.newTokens; i++) {
        const k = input.length;
        const r = await p.decodeGreedy(
          input,
          Int32Array.from({ length: k }, (_, j) => at + j),
          new Int32Array(k).fill(seq),
          Uint8Array.from({ length: k }, (_, j) => (j === k - 1 ? 1 : 0)),
        );
        const t = r.tokens[0];
        if (i === 0) ttft = r.ms;
        else decodeMs += r.ms;
        if (o.tokenizer.isEndOfGeneration(t)) break;
        n++;
        at += k;
        input = Int32Array.of(t);
      }
      await p.release(seq);
      out.push({ ttftMs: ttft, decodeTokPerS: (n - 1) / (decodeMs / 1000), tokens: n });
    }
    return out;
  } finally {
    await p.close();
  }
}

export function printUpBench(r: Awaited<ReturnType<typeof benchUp>>): string {
  return [
    `strata up (split ${r.split}, ${r.threads_per_node} thread(s) a node) vs whole model (${r.whole_model_threads} threads), greedy, same prompts`,
    `TTFT p50:        whole ${r.whole.ttft_ms_p50.toFixed(1)} ms, strata up ${
      r.strata_up.ttft_ms_p50.toFixed(1)
    } ms (${r.ttft_ratio.toFixed(2)}×)`,
    `decode p50:      whole ${r.whole.decode_tok_s_p50.toFixed(1)} tok/s, strata up ${
      r.strata_up.decode_tok_s_p50.toFixed(1)
    } tok/s (${r.decode_ratio.toFixed(2)}×)`,
    `tokens:          whole ${r.whole.tokens.join(",")}; strata up ${r.strata_up.tokens.join(",")}`,
  ].join("\n");
}
