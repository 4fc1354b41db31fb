// `strata parity --transport direct|relay`: the comparison across real node processes
// talking over seams. Each session alone must give the whole model's tokens exactly
// (greedy, and sampled with the same policy applied to the whole model's logits); the
// sessions together, started at staggered times, must give what they give alone (or a
// reported near-tie); cancelling some mid-generation must leave the others intact and
// free exactly their cells.
import { Compression } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { formatRange, type LayerRange } from "../../src/engine/layer-range.ts";
import type { Tokenizer } from "../../src/engine/tokenizer.ts";
import type { NodeInfo } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { sigma, tokenAgreement, top2 } from "../../src/parity/compare.ts";
import { CROSS_ENGINE_TOLERANCE } from "../../src/parity/tolerance.ts";
import { GREEDY, type SamplingPolicy } from "../../src/route/route-session.ts";
import { parseHopUrl } from "../../src/route/hop-url.ts";
import { choose } from "../../src/sampling/sampler.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { type LocalRoute, startLocalRoute, type Transport } from "../hosts/local-route.ts";
import { EngineProcess } from "../engine-host/engine-process.ts";
import { parityPrompts, type PromptOptions } from "./prompts.ts";

export interface RouteParityOptions {
  modelPath: string;
  modelName: string;
  split: LayerRange[];
  nLayer: number;
  backend: NativeBackend;
  transport: Transport;
  /** per node: native (default) or wasm */
  engines?: ("native" | "wasm")[];
  tokens: number;
  sessions: number;
  threads: number;
  tokenizer: Tokenizer;
  prompts?: PromptOptions;
  /** ms between session starts in the concurrent phases */
  staggerMs?: number;
  /** how hidden states cross the seams (default f32) */
  compression?: Compression;
}

/**
 * A sampled divergence counts as a near-tie when the whole model's draw was this close (in
 * probability) to its token's interval edge: batched logits drift enough to move edges by a few
 * hundredths (margins seen: 0.0007-0.051); a fault (cross-talk, a wrong cache) moves whole distributions.
 */
const SAMPLED_TIE_MARGIN = 0.1;

interface RefStep {
  token: number;
  /** greedy: top-2 gap in σ; sampled: the draw's distance to its interval's edge */
  marginSigma: number;
}

const policyFor = (s: number): SamplingPolicy =>
  s % 2 === 0 ? GREEDY : { temperature: 0.8, topK: 40, topP: 0.95, seed: BigInt(1000 + s) };

export async function runRouteParity(o: RouteParityOptions) {
  const started = performance.now();
  const prompts = parityPrompts(o.tokenizer, o.sessions, o.prompts);
  const reference = await wholeModel(o, prompts);
  const local = await startLocalRoute({
    modelPath: o.modelPath,
    split: o.split,
    nLayer: o.nLayer,
    backend: o.backend,
    threads: o.threads,
    transport: o.transport,
    engines: o.engines,
    maxSessions: Math.max(16, o.sessions),
    // batched sessions take turns a cohort at a time whatever the nodes' batch costs (the checks
    // count each node's batches against its cohort)
    cohorts: true,
  });
  const run = { local, compression: o.compression ?? Compression.NONE };
  const crossEngine = (o.engines ?? []).some((e) => e !== "native");
  try {
    // starts close enough that every session overlaps the others even where a 32-token session
    // takes under 300 ms (an AMX CPU's prefill): 8 sessions in 70 ms
    const stagger = o.staggerMs ?? 10;
    // 1. alone, one session after another
    const alone: number[][] = [];
    let seams: SeamsSeen | undefined;
    for (let s = 0; s < o.sessions; s++) {
      const r = await generate(run, "alone", s, prompts[s], o.tokens, 0);
      alone.push(r.tokens);
      seams ??= r.seams;
    }
    // f32 seams on the reference's engine: the route alone is the whole model, token for token.
    // q8 seams, or a hop on another engine (WASM), change the numbers: a divergence then counts
    // only where the whole model itself was a near-tie
    const exact = run.compression === Compression.NONE && !crossEngine;
    const tieAlone = (s: number) =>
      exact ? 0 : policyFor(s).temperature > 0 ? SAMPLED_TIE_MARGIN : CROSS_ENGINE_TOLERANCE.tieGapSigma;
    const aloneVsWhole = alone.map((t, s) => tokenAgreement(reference[s], t, tieAlone(s)));
    // 2. together, staggered starts
    const together = await Promise.all(
      prompts.map((p, s) => generate(run, "together", s, p, o.tokens, s * stagger)),
    );
    const infos = await nodeInfos(local);
    const togetherVs = together.map((r, s) => agree(reference[s], alone[s], r.tokens));
    // 3. together again, cancelling some mid-generation; the others hold their cells until all are done
    const cancelled = new Set(
      Array.from({ length: Math.max(1, Math.floor(o.sessions / 4)) }, (_, i) => 1 + 2 * i),
    );
    const survivors = prompts.length - cancelled.size;
    let finished = 0;
    let allDone!: () => void;
    const everyoneDone = new Promise<void>((r) => (allDone = r));
    let checked!: () => void;
    const kvChecked = new Promise<void>((r) => (checked = r));
    const withCancel = Promise.all(prompts.map(async (p, s) => {
      const cancelAfter = cancelled.has(s) ? Math.max(1, Math.floor(o.tokens / 2)) : undefined;
      return await generate(run, "cancel", s, p, o.tokens, s * stagger, cancelAfter, async () => {
        if (++finished === survivors) allDone();
        await kvChecked;
      });
    }));
    await everyoneDone;
    const kvHeld = await nodeInfos(local);
    checked();
    const cancelRuns = await withCancel;
    const kvAfter = await nodeInfos(local);
    const relayChannels = await openRelayChannels(local);
    const expectedCells = prompts.reduce(
      (n, p, s) => (cancelled.has(s) ? n : n + p.length + o.tokens - 1),
      0,
    );
    const survivorsVs = cancelRuns.map((
      r,
      s,
    ) => (cancelled.has(s) ? null : agree(reference[s], alone[s], r.tokens)));

    const tokensMatch = aloneVsWhole.every((a) => exact ? a.kind === "identical" : a.kind !== "mismatch");
    const togetherMatch = togetherVs.every((a) => a.kind === "identical");
    const cancelOk = survivorsVs.every((a) => a === null || a.kind === "identical") &&
      kvHeld.every((i) => i.info === null || i.info.kvCellsUsed === expectedCells) &&
      kvAfter.every((i) => i.info === null || i.info.kvCellsUsed === 0);
    const maxBatchSessions = Math.max(...infos.map((i) => i.info?.maxBatchSessions ?? 0));
    const report = {
      model: o.modelName,
      transport: o.transport,
      engines: o.split.map((_, i) => o.engines?.[i] ?? "native"),
      split: o.split.map(formatRange).join(","),
      backend: `native-${o.backend}`,
      hops: local.route.hops.map((h) => h.url),
      seams,
      seam_compression: Compression[run.compression],
      sessions: o.sessions,
      prompt_tokens: prompts.map((p) => p.length),
      sampling: prompts.map((_, s) => (policyFor(s).temperature > 0 ? "sampled" : "greedy")),
      tokens_per_session: o.tokens,
      alone_vs_whole: aloneVsWhole,
      tokens_match: tokensMatch,
      together: {
        agreements: togetherVs,
        max_batch_sessions: maxBatchSessions,
        node_batches: infos.map((i) => ({
          hop: i.hop,
          max_batch_sessions: i.info?.maxBatchSessions ?? null,
        })),
      },
      together_match: togetherMatch,
      cancel: {
        cancelled: [...cancelled],
        survivors: survivorsVs,
        kv_cells_expected_while_survivors_hold: expectedCells,
        kv_cells_used_while_survivors_hold: kvHeld.map((i) => ({
          hop: i.hop,
          used: i.info?.kvCellsUsed ?? null,
        })),
        kv_cells_used_after_release: kvAfter.map((i) => ({ hop: i.hop, used: i.info?.kvCellsUsed ?? null })),
        // channels the relay still keeps once every session ended (none without a relay)
        relay_channels_after_release: relayChannels,
      },
      cancel_ok: cancelOk,
      text: o.tokenizer.chatTemplate ? o.tokenizer.detokenize(alone[0]) : undefined,
      seconds: (performance.now() - started) / 1000,
    };
    return { ...report, ok: tokensMatch && togetherMatch && cancelOk && maxBatchSessions > 1 };
  } finally {
    await local.close();
  }

  /** The relay's open channels once both sides of every stream closed (they close just after the replies). */
  async function openRelayChannels(l: LocalRoute): Promise<number | null> {
    if (!l.relay) return null;
    const health = `${String(l.relay.ready.url).replace(/^ws/, "http")}/health`;
    await new Promise((r) => setTimeout(r, 300));
    return (await (await fetch(health)).json()).channels;
  }

  function agree(ref: RefStep[], aloneTokens: number[], run: number[]) {
    // batch-invariant nodes: together (and after others cancel) equals alone token for token,
    // so no divergence is a near-tie (its margin on the whole model is reported all the same)
    return tokenAgreement(
      aloneTokens.map((t, i) => ({ token: t, marginSigma: ref[i]?.marginSigma ?? 0 })),
      run,
      0,
    );
  }
}

async function generate(
  { local, compression }: { local: LocalRoute; compression: Compression },
  phase: string,
  s: number,
  prompt: Int32Array,
  n: number,
  delayMs: number,
  cancelAfter?: number,
  beforeRelease?: () => Promise<void>,
): Promise<{ tokens: number[]; cancelled: boolean; seams?: SeamsSeen }> {
  if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
  const session = await local.route.open(`parity-${phase}-${s}`, {
    sampling: policyFor(s),
    kvCells: prompt.length + n,
    compression,
  });
  const tokens: number[] = [];
  let seams: SeamsSeen | undefined;
  for await (const r of session.generate(prompt, n, () => false)) {
    tokens.push(r.token);
    seams = {
      crossings_per_decode_step: r.crossings,
      driver_to_first: r.transport.first,
      // each node names what it sent the step on, in route order (the last: its reply)
      node_sends: r.telemetry.toReversed().map((t) => `${t.node}: ${t.transport}`),
    };
    if (cancelAfter !== undefined && tokens.length >= cancelAfter) {
      await session.cancel();
      return { tokens, cancelled: true };
    }
  }
  await beforeRelease?.();
  await session.release();
  return { tokens, cancelled: false, seams };
}

interface SeamsSeen {
  crossings_per_decode_step: number;
  driver_to_first: string;
  node_sends: string[];
}

async function nodeInfos(local: LocalRoute): Promise<Array<{ hop: string; info: NodeInfo | null }>> {
  return await Promise.all(local.route.hops.map(async (h) => ({
    hop: h.url,
    // a relay-only node accepts no connections, so it cannot be asked
    info: parseHopUrl(h.url).kind === "direct" ? await local.route.dialer.grpc.info(h.url) : null,
  })));
}

/** Whole-model llama.cpp: each prompt alone, greedy or sampled with the session's policy. */
async function wholeModel(o: RouteParityOptions, prompts: Int32Array[]): Promise<RefStep[][]> {
  const whole = await EngineProcess.spawn({
    modelPath: o.modelPath,
    range: "whole",
    kvCells: Math.max(...prompts.map((p) => p.length)) + o.tokens + 8,
    maxSequences: 1,
    batchTokens: Math.max(512, ...prompts.map((p) => p.length)),
    threads: o.threads,
    backend: o.backend,
  });
  try {
    const out: RefStep[][] = [];
    for (const [s, prompt] of prompts.entries()) {
      const seq = await whole.open();
      const steps: RefStep[] = [];
      let input = prompt;
      let at = 0;
      for (let i = 0; i < o.tokens; i++) {
        const n = input.length;
        const outputs = new Uint8Array(n);
        outputs[n - 1] = 1;
        const r = await whole.decode(
          input,
          Int32Array.from({ length: n }, (_, k) => at + k),
          new Int32Array(n).fill(seq),
          outputs,
        );
        const policy = policyFor(s);
        const c = choose(r.data, policy, at + n - 1);
        const marginSigma = policy.temperature > 0 ? c.margin : top2(r.data).gap / sigma(r.data);
        steps.push({ token: c.token, marginSigma });
        at += n;
        input = Int32Array.of(c.token);
      }
      await whole.release(seq);
      out.push(steps);
    }
    return out;
  } finally {
    await whole.close();
  }
}

export function printRouteParity(r: Awaited<ReturnType<typeof runRouteParity>>): string {
  const ties = (a: Array<{ kind: string } | null>) => a.filter((x) => x?.kind === "near_tie").length;
  return [
    `${r.model} split ${r.split} on ${r.engines.join("+")} engines, ${r.transport} seams: ${
      r.hops.join(" → ")
    }`,
    r.text === undefined ? "" : `route output: ${JSON.stringify(r.text)}`,
    `alone vs whole-model llama.cpp (${r.sessions} sessions, greedy and sampled): ${
      r.tokens_match ? "identical" : "MISMATCH"
    }`,
    `together, staggered: ${r.together_match ? "match" : "MISMATCH"} (${
      ties(r.together.agreements)
    } near-ties), up to ${r.together.max_batch_sessions} sessions a batch`,
    `cancel ${r.cancel.cancelled.length} mid-generation: ${
      r.cancel_ok ? "others intact, their cells exactly kept, all freed" : "WRONG"
    }`,
    `${r.ok ? "PASS" : "FAIL"} in ${r.seconds.toFixed(1)} s`,
  ].filter(Boolean).join("\n");
}
