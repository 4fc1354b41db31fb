// `strata bench gate-a`: the product plan's first gate on this machine. The same weights in
// four lanes — SmolLM2's Q4_1 GGUF dequantized to F32 safetensors and run by Transformers on
// PyTorch CPU (the reference), llama.cpp on an F16 GGUF of those weights (correctness lane),
// llama.cpp on the Q4_1 GGUF (performance lane) and a Strata route of 2 on Q4_1 — with the
// same prompt ids everywhere: TTFT, prefill and decode tok/s, p50/p95, RSS, artifact size, and
// drift against the reference over a fixed text (the project's own docs, 2,048 tokens).
import { join } from "node:path";
import { parseSplit } from "../../src/engine/layer-range.ts";
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { ensureNativeLibrary } from "../../server/build/native.ts";
import { DEFAULT_MODEL } from "../../server/model/default-model.ts";
import { fileFacts } from "../../server/model/facts.ts";
import { sha256File } from "../../server/model/hash.ts";
import { graphShape } from "../../src/gguf/graph-shape.ts";
import { resolveModel } from "../../server/model/fetch.ts";
import { cacheDir, repoRoot } from "../../server/process/paths.ts";
import { EngineProcess } from "../engine-host/engine-process.ts";
import { startLocalRoute } from "../hosts/local-route.ts";
import { type EngineFigures, figures } from "../bench/figures.ts";
import { measureWhole } from "../bench/measure-engine.ts";
import { measureRoute } from "../bench/measure-route.ts";
import { prompt } from "../bench/route-throughput.ts";
import { argmax, Drift, RefRows } from "./drift.ts";
import { gateAPython, laneScript, PYTHON_PINS } from "./python-lane.ts";

export interface GateAOptions {
  readonly threads: number;
  readonly promptTokens: number;
  readonly decodeTokens: number;
  readonly textTokens: number;
  readonly split: string;
  readonly progress: (s: string) => void;
}

/** The fixed text: the project's own docs, in a fixed order. */
const TEXT_FILES = ["README.md", "docs/seams.md", "docs/network.md", "docs/engine.md", "docs/benchmarks.md"];

interface Lane extends EngineFigures {
  readonly lane: string;
  readonly runs_on: string;
  readonly artifact: string;
  readonly artifact_mb: number;
  readonly drift: ReturnType<Drift["summary"]>;
}

const mb = async (path: string) => (await Deno.stat(path)).size / 2 ** 20;

export async function benchGateA(o: GateAOptions) {
  const say = o.progress;
  const started = performance.now();
  const { path: q41, name } = await resolveModel(DEFAULT_MODEL.name);
  await ensureNativeLibrary("cpu");
  const facts = await fileFacts(q41);
  const { nEmbd, nVocab } = graphShape(facts.header.tensors);
  const python = await gateAPython(say);

  // 1. the same weights for the other lanes: F32 safetensors and an F16 GGUF
  const exported = cacheDir("gate-a", `export-${(await sha256File(q41)).slice(0, 16)}`);
  const f16 = join(exported, "model-f16.gguf");
  if (!(await Deno.stat(f16).then(() => true, () => false))) {
    await Deno.mkdir(exported, { recursive: true });
    say("dequantizing the Q4_1 GGUF: F32 safetensors for Transformers, an F16 GGUF for llama.cpp");
    await laneScript(python, ["export", q41, exported], say);
  }

  // 2. the fixed text and the prompt, as token ids every lane gets
  const tokenizer = await NativeTokenizer.load(q41);
  let text: Int32Array;
  try {
    const docs = await Promise.all(TEXT_FILES.map((f) => Deno.readTextFile(join(repoRoot, f))));
    text = tokenizer.tokenize(docs.join("\n\n"), { addSpecial: false }).subarray(0, o.textTokens);
  } finally {
    tokenizer.close();
  }
  if (text.length < o.textTokens) throw new Error(`the fixed text has only ${text.length} tokens`);
  const p = prompt(o.promptTokens, 0);

  // 3. the reference: Transformers, F32, PyTorch CPU
  say("Transformers F32 on PyTorch CPU");
  const work = await Deno.makeTempDir({ prefix: "strata-gate-a-" });
  const refPath = join(work, "reference-logprobs.f32");
  const job = join(work, "job.json");
  await Deno.writeTextFile(
    job,
    JSON.stringify({
      threads: o.threads,
      prompt: [...p],
      warmup: [...prompt(16, 99)],
      decode_tokens: o.decodeTokens,
      text: [...text],
      logprobs_out: refPath,
    }),
  );
  const hf = await laneScript<{ ttft_ms: number; step_ms: number[]; rss_mb: number; torch: string }>(
    python,
    ["run", exported, job],
    say,
  );
  const ref = await RefRows.open(refPath, nVocab);
  try {
    const lanes: Lane[] = [{
      lane: "Transformers F32 (reference)",
      runs_on: `PyTorch ${hf.torch} CPU, ${o.threads} thread(s)`,
      artifact: "model.safetensors (F32)",
      artifact_mb: await mb(join(exported, "model.safetensors")),
      ...figures(o.promptTokens, hf.ttft_ms, hf.step_ms, hf.rss_mb * 2 ** 20),
      drift: { positions: text.length, kl_mean: 0, kl_max: 0, top1_agreement: 1 },
    }];

    // 4. llama.cpp on the F16 GGUF and on the Q4_1 GGUF (whose greedy tokens the route's must equal)
    let wholeTop: number[] = [];
    for (
      const [lane, path, artifact] of [
        ["llama.cpp F16 (correctness)", f16, "F16 GGUF"],
        ["llama.cpp Q4_1 (performance)", q41, "Q4_1 GGUF"],
      ] as const
    ) {
      say(lane);
      const speed = await measureWhole({ modelPath: path, backend: "cpu", threads: o.threads, ...counts(o) });
      const { drift, top } = await wholeDrift(path, text, ref, o.threads);
      if (path === q41) wholeTop = top;
      lanes.push({
        lane,
        runs_on: `native llama.cpp (${speed.engine}), ${o.threads} thread(s)`,
        artifact,
        artifact_mb: await mb(path),
        ...speed,
        drift,
      });
    }

    // 5. the Strata route of 2 on Q4_1: its figures, and its greedy token at every position
    say(`Strata route of 2 (${o.split}) on Q4_1`);
    const split = parseSplit(o.split, facts.nLayer);
    const route = await measureRoute({
      modelPath: q41,
      split,
      nLayer: facts.nLayer,
      nEmbd,
      backend: "cpu",
      threads: o.threads,
      concurrency: [],
      ...counts(o),
    });
    const routeTop = await routeTopTokens(q41, split, facts.nLayer, text, o.threads);
    const drift = new Drift();
    for (let i = 0; i < text.length; i++) drift.add(await ref.row(i), routeTop[i]);
    const q41Lane = lanes[2];
    lanes.push({
      lane: `Strata route of 2 (${o.split}), Q4_1`,
      runs_on: `2 node processes, ${o.threads} thread(s) each, loopback`,
      artifact: "Q4_1 GGUF (each node loads its range)",
      artifact_mb: q41Lane.artifact_mb,
      ttft_ms: route.ttft_ms,
      prefill_tps: route.prefill_tps,
      decode_tps: route.decode_tps,
      p50_ms: route.p50_ms,
      p95_ms: route.p95_ms,
      rss_mb: route.rss_mb,
      // the route's logits are the Q4_1 whole model's (exact split parity): its KL is that lane's
      drift: { ...drift.summary(), kl_mean: q41Lane.drift.kl_mean, kl_max: q41Lane.drift.kl_max },
    });
    const routeSameAsWhole = routeTop.every((t, i) => t === wholeTop[i]);

    const [hfLane, f16Lane] = lanes;
    return {
      gate: "A",
      question:
        "does the GGUF path give a meaningful speed or fit advantage at acceptable quality on this machine?",
      model: name,
      machine: { cores: navigator.hardwareConcurrency, threads_per_engine_process: o.threads },
      prompt_tokens: o.promptTokens,
      decode_tokens: o.decodeTokens,
      text: { source: TEXT_FILES.join(" + "), tokens: text.length },
      python_packages: PYTHON_PINS,
      lanes,
      route_tokens_same_as_whole_q4_1: routeSameAsWhole,
      ratios: {
        q4_1_vs_reference_decode: q41Lane.decode_tps / hfLane.decode_tps,
        q4_1_vs_reference_prefill: q41Lane.prefill_tps / hfLane.prefill_tps,
        f16_vs_reference_decode: f16Lane.decode_tps / hfLane.decode_tps,
        route2_vs_reference_decode: lanes[3].decode_tps / hfLane.decode_tps,
        q4_1_vs_reference_artifact: q41Lane.artifact_mb / hfLane.artifact_mb,
        q4_1_vs_reference_rss: q41Lane.rss_mb / hfLane.rss_mb,
      },
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    ref.close();
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}

const counts = (o: GateAOptions) => ({ promptTokens: o.promptTokens, decodeTokens: o.decodeTokens });

const CHUNK = 256;

/** The whole model's logits at every position of the text, chunk by chunk, against the reference. */
/** The whole model's drift over the text, and its greedy token at every position. */
async function wholeDrift(path: string, text: Int32Array, ref: RefRows, threads: number) {
  const drift = new Drift();
  const top: number[] = [];
  await wholeLogits(path, text, threads, async (i, row) => {
    drift.add(await ref.row(i), row);
    top[i] = argmax(row);
  });
  return { drift: drift.summary(), top };
}

async function wholeLogits(
  path: string,
  text: Int32Array,
  threads: number,
  each: (position: number, logits: Float32Array) => void | Promise<void>,
): Promise<void> {
  const e = await EngineProcess.spawn({
    modelPath: path,
    range: "whole",
    kvCells: text.length + 16,
    maxSequences: 1,
    batchTokens: CHUNK,
    threads,
    backend: "cpu",
  });
  try {
    const seq = await e.open();
    for (let at = 0; at < text.length; at += CHUNK) {
      const n = Math.min(CHUNK, text.length - at);
      const r = await e.decode(
        text.subarray(at, at + n),
        Int32Array.from({ length: n }, (_, i) => at + i),
        new Int32Array(n).fill(seq),
        new Uint8Array(n).fill(1),
      );
      for (let i = 0; i < n; i++) await each(at + i, r.data.subarray(i * r.dim, (i + 1) * r.dim));
    }
  } finally {
    await e.close();
  }
}

/** The route's greedy token after every position of the text, the text fed one token a step. */
async function routeTopTokens(
  modelPath: string,
  split: ReturnType<typeof parseSplit>,
  nLayer: number,
  text: Int32Array,
  threads: number,
): Promise<number[]> {
  const local = await startLocalRoute({
    modelPath,
    split,
    nLayer,
    backend: "cpu",
    threads,
    transport: "direct",
    // one session holds the whole text
    kvCells: text.length + 64,
    maxSessions: 1,
  });
  try {
    const session = await local.route.open("gate-a-text", { kvCells: text.length + 1 });
    const top = [(await session.prefill(text.subarray(0, 1))).token];
    for (let i = 1; i < text.length; i++) top.push((await session.decode(text[i])).token);
    await session.release();
    return top;
  } finally {
    await local.close();
  }
}
