// `strata parity`: every shard of a split in its own OS process, hidden states passed
// between them, compared with whole-model llama.cpp from the same pin (a model loaded
// whole, no range) — prefill, greedy decode, and batched sessions.
import { formatRange, type LayerRange } from "../../src/engine/layer-range.ts";
import type { SeqId } from "../../src/engine/range-engine.ts";
import type { Tokenizer } from "../../src/engine/tokenizer.ts";
import { type Agreement, agreement, maxAbs, maxAbsDiff, type Step, top2 } from "../../src/parity/compare.ts";
import {
  BATCH_TOLERANCE,
  bitIdentical,
  CROSS_ENGINE_TOLERANCE,
  EXACT,
  hiddenTolerance,
} from "../../src/parity/tolerance.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { EngineProcess } from "../engine-host/engine-process.ts";
import type { EngineHost, EngineHostLoad, HostBackend } from "../engine-host/engine-host.ts";
import { parityPrompts, type PromptOptions } from "./prompts.ts";
import { ChromiumHosts } from "../browser/chromium-hosts.ts";

/** Where the split's shards run: each in its own OS process, or each in a headless Chromium tab. */
export type ShardHost = "process" | "chromium";

export interface ParityOptions {
  modelPath: string;
  modelName: string;
  split: LayerRange[];
  backend: HostBackend;
  host?: ShardHost;
  tokens: number;
  sessions: number;
  threads: number;
  tokenizer: Tokenizer;
  prompts?: PromptOptions;
}

const lastOnly = (n: number) => {
  const o = new Uint8Array(n);
  o[n - 1] = 1;
  return o;
};
const iota = (from: number, n: number) => Int32Array.from({ length: n }, (_, i) => from + i);

/** A route of shard processes fed in lockstep. */
class Chain {
  constructor(readonly shards: EngineHost[]) {}

  /** Returns the last shard's output rows and every seam's hidden states. */
  async step(tokens: Int32Array, pos: Int32Array, seqs: Int32Array[], outputs: Uint8Array) {
    let input: Int32Array | Float32Array = tokens;
    const seams: Float32Array[] = [];
    for (let j = 0; j < this.shards.length; j++) {
      const r = await this.shards[j].decode(input, pos, seqs[j], outputs);
      if (j < this.shards.length - 1) seams.push(r.data);
      input = r.data;
    }
    return { logits: input as Float32Array, seams };
  }
}

export async function runParity(o: ParityOptions) {
  const started = performance.now();
  const prompts = parityPrompts(o.tokenizer, o.sessions, o.prompts);
  const longest = Math.max(...prompts.map((p) => p.length));
  const base: Omit<EngineHostLoad, "range"> = {
    modelPath: o.modelPath,
    kvCells: Math.max(512, o.sessions * (longest + o.tokens + 8)),
    maxSequences: o.sessions,
    batchTokens: Math.max(512, prompts.reduce((n, p) => n + p.length, 0) + o.sessions),
    threads: o.threads,
    backend: o.backend,
  };
  // the reference is always whole-model native llama.cpp: the WASM engines are held to CPU's
  const wholeBackend: NativeBackend = isNative(o.backend) ? o.backend : "cpu";
  // loads one after another, so that shard loads (and a GPU driver's shader builds) do not
  // compete for the cores
  const whole = await EngineProcess.spawn({ ...base, backend: wholeBackend, range: "whole", capture: true });
  const shards: EngineHost[] = [];
  const host = o.host === "chromium" ? await ChromiumHosts.launch(o.modelPath) : undefined;
  try {
    for (const range of o.split) {
      shards.push(host ? await host.load({ ...base, range }) : await EngineProcess.spawn({ ...base, range }));
    }
    const chain = new Chain(shards);
    // another engine's kernels round differently: a greedy divergence is accepted only where
    // the whole model itself nearly chose the other token (the near-tie rule)
    const crossEngine = shards.some((p) => p.engineBackend !== whole.engineBackend);
    const seamLayers = o.split.slice(0, -1).map((r) => r.end - 1);
    const nVocab = whole.facts.nVocab;

    // 1. each session alone: whole model vs the route, step by step
    const seamDiff = seamLayers.map(() => 0);
    const seamScale = seamLayers.map(() => 0);
    let logitDiff = 0;
    const aloneRoute: Step[][] = [];
    const aloneDivergences: (Agreement & { session: number })[] = [];
    let compared = 0;
    let firstMismatch: Record<string, number> | null = null;
    for (let s = 0; s < o.sessions; s++) {
      const wSeq = await whole.open();
      const rSeqs = await Promise.all(shards.map((p) => p.open()));
      const rSteps: Step[] = [];
      const wSteps: Step[] = [];
      let tokens = prompts[s];
      let pos = iota(0, tokens.length);
      for (let step = 0; step < o.tokens; step++) {
        const n = tokens.length;
        const w = await whole.decode(
          tokens,
          pos,
          Int32Array.from({ length: n }, () => wSeq),
          lastOnly(n),
          seamLayers,
        );
        const r = await chain.step(tokens, pos, rSeqs.map((q) => new Int32Array(n).fill(q)), lastOnly(n));
        seamLayers.forEach((_, k) => {
          seamDiff[k] = Math.max(seamDiff[k], maxAbsDiff(r.seams[k], w.captured[k]));
          seamScale[k] = Math.max(seamScale[k], maxAbs(w.captured[k]));
        });
        logitDiff = Math.max(logitDiff, maxAbsDiff(w.data, r.logits));
        const wTok = top2(w.data).best;
        const rTok = top2(r.logits).best;
        rSteps.push({ token: rTok, logits: r.logits });
        wSteps.push({ token: wTok, logits: w.data });
        compared++;
        if (wTok !== rTok) {
          firstMismatch ??= { session: s, step, whole: wTok, route: rTok };
          aloneDivergences.push({
            session: s,
            ...agreement(wSteps, rSteps, crossEngine ? CROSS_ENGINE_TOLERANCE : BATCH_TOLERANCE),
          });
          break;
        }
        tokens = Int32Array.of(rTok);
        pos = iota(pos[n - 1] + 1, 1);
      }
      aloneRoute.push(rSteps);
      await whole.release(wSeq);
      await Promise.all(shards.map((p, j) => p.release(rSeqs[j])));
    }
    const kvAfterAlone = await Promise.all(shards.map(async (p) => (await p.memory()).memory.kvCellsUsed));

    // 2. the sessions together: staggered joins, prefill chunks and decode steps in one batch
    // every session runs its full length batched, also one whose alone run stopped at a
    // near-tie: agreement compares the steps both have
    const together = await batchedRun(shards, chain, prompts, prompts.map(() => o.tokens), nVocab);
    // 3. the same, releasing session 0 halfway: its cells are freed, the others go on
    const releaseAfter = Math.max(1, Math.floor(o.tokens / 2));
    const withRelease = await batchedRun(shards, chain, prompts, prompts.map(() => o.tokens), nVocab, {
      session: 0,
      after: releaseAfter,
    });
    const batched = together.steps;
    const release = withRelease.release!;
    const maxBatchTokens = together.maxBatchTokens;
    const maxBatchSessions = together.maxBatchSessions;
    // batch-invariant engines: batched equals alone bit for bit, before and after a release
    const tol = EXACT;
    const afterRelease = prompts.map((_, s) =>
      s === 0 ? null : agreement(aloneRoute[s], withRelease.steps[s], tol)
    );
    const agreements: Agreement[] = prompts.map((_, s) =>
      agreement(aloneRoute[s].slice(0, batched[s].length), batched[s], tol)
    );
    const rss = await Promise.all([whole, ...shards].map(async (p) => (await p.memory()).rss));
    // released: exactly its cells; the others keep theirs and go on as they would alone
    const releaseOk = release.cells_freed.every((c) => c === release.cells_expected) &&
      release.others_cells_kept &&
      afterRelease.every((a) => a === null || bitIdentical(a));
    // a seam is held to the loosest engine upstream of it; the reference is native
    const seamTol = seamLayers.map((_, k) =>
      hiddenTolerance(whole.engineBackend, shards.slice(0, k + 1).map((p) => p.engineBackend))
    );
    const hiddenOk = seamDiff.every((d, k) => d <= seamTol[k] * Math.max(1, seamScale[k]));
    const tokensMatch = firstMismatch === null;
    const tokensAgree = tokensMatch ||
      (crossEngine && aloneDivergences.every((d) => d.kind === "near_tie"));
    const batchedMatch = agreements.every(bitIdentical);
    const report = {
      model: o.modelName,
      arch: whole.facts.arch,
      n_layer: whole.facts.nLayer,
      // floats of one token's hidden state at a seam (deepseek4: its 4 residual streams)
      seam_width: whole.facts.seamWidth,
      split: o.split.map(formatRange).join(","),
      backend: isNative(o.backend) ? `native-${o.backend}` : o.backend,
      engine_backends: shards.map((p) => p.engineBackend),
      host: o.host ?? "process",
      reference: `native-${wholeBackend} whole model`,
      sessions: o.sessions,
      prompt_tokens: prompts.map((p) => p.length),
      tokens_compared: compared,
      tokens_match: tokensMatch,
      first_mismatch: firstMismatch,
      cross_engine: crossEngine,
      tokens_agree: tokensAgree,
      alone_divergences: aloneDivergences,
      max_abs_diff_hidden: seamLayers.map((il, k) => ({
        after_layer: il,
        diff: seamDiff[k],
        max_abs: seamScale[k],
        tolerance_rel: seamTol[k],
      })),
      max_abs_diff_logits: logitDiff,
      hidden_within_tolerance: hiddenOk,
      batched_match: batchedMatch,
      batched: {
        agreements,
        near_ties: agreements.filter((a) => a.kind === "near_tie"),
        tolerance_sigma: tol,
        max_batch_tokens: maxBatchTokens,
        max_batch_sessions: maxBatchSessions,
      },
      release: { ...release, others_after_release: afterRelease },
      release_ok: releaseOk,
      kv_cells_used_after_alone: kvAfterAlone,
      rss_mb: { whole: rss[0] / 2 ** 20, shards: rss.slice(1).map((b) => b / 2 ** 20) },
      text: o.tokenizer.chatTemplate ? o.tokenizer.detokenize(aloneRoute[0].map((s) => s.token)) : undefined,
      seconds: (performance.now() - started) / 1000,
    };
    return { ...report, ok: tokensAgree && hiddenOk && batchedMatch && releaseOk };
  } finally {
    await Promise.all([whole, ...shards].map((p) => p.close()));
    await host?.close();
  }
}

export type ParityReport = Awaited<ReturnType<typeof runParity>>;

const isNative = (b: HostBackend): b is NativeBackend => b !== "wasm" && b !== "webgpu";

interface Release {
  session: number;
  after_tokens: number;
  cells_expected: number;
  cells_freed: number[];
  others_cells_kept: boolean;
}

/**
 * Sessions join two iterations apart; each iteration is one batch through the route:
 * the newcomers' whole prompts and one decode token of every running session.
 */
async function batchedRun(
  shards: EngineHost[],
  chain: Chain,
  prompts: Int32Array[],
  lengths: number[],
  nVocab: number,
  releaseAt?: { session: number; after: number },
) {
  const steps: Step[][] = prompts.map(() => []);
  const seqIds: SeqId[][] = [];
  const active = new Set<number>();
  const target = (
    s: number,
  ) => (releaseAt?.session === s ? Math.min(lengths[s], releaseAt.after) : lengths[s]);
  let maxBatchTokens = 0;
  let maxBatchSessions = 0;
  let release: Release | undefined;
  for (let iter = 0; steps.some((b, s) => b.length < target(s)); iter++) {
    for (let s = 0; s < prompts.length; s++) {
      if (2 * s === iter) {
        seqIds[s] = await Promise.all(shards.map((p) => p.open()));
        active.add(s);
      }
    }
    const toks: number[] = [], pos: number[] = [], outs: number[] = [], who: number[] = [];
    const seqs: number[][] = shards.map(() => []);
    for (const s of active) {
      const done = steps[s];
      const input = done.length === 0 ? Array.from(prompts[s]) : [done[done.length - 1].token];
      const start = done.length === 0 ? 0 : prompts[s].length + done.length - 1;
      input.forEach((t, i) => {
        toks.push(t);
        pos.push(start + i);
        outs.push(i === input.length - 1 ? 1 : 0);
        shards.forEach((_, j) => seqs[j].push(seqIds[s][j]));
        if (i === input.length - 1) who.push(s);
      });
    }
    if (toks.length === 0) continue;
    maxBatchTokens = Math.max(maxBatchTokens, toks.length);
    maxBatchSessions = Math.max(maxBatchSessions, active.size);
    const r = await chain.step(
      Int32Array.from(toks),
      Int32Array.from(pos),
      seqs.map((q) => Int32Array.from(q)),
      Uint8Array.from(outs),
    );
    who.forEach((s, i) => {
      const logits = r.logits.slice(i * nVocab, (i + 1) * nVocab);
      steps[s].push({ token: top2(logits).best, logits });
    });
    for (const s of [...active]) {
      if (steps[s].length < target(s)) continue;
      active.delete(s);
      const before = await Promise.all(shards.map(async (p) => (await p.memory()).memory.kvCellsUsed));
      const after = await Promise.all(
        shards.map(async (p, j) => (await p.release(seqIds[s][j])).kvCellsUsed),
      );
      if (releaseAt?.session === s) {
        const cells = prompts[s].length + steps[s].length - 1;
        const othersCells = [...active].reduce((n, o) => n + prompts[o].length + steps[o].length - 1, 0);
        release = {
          session: s,
          after_tokens: steps[s].length,
          cells_expected: cells,
          cells_freed: before.map((b, j) => b - after[j]),
          others_cells_kept: after.every((a) => a === othersCells),
        };
      }
    }
  }
  return { steps, release, maxBatchTokens, maxBatchSessions };
}
