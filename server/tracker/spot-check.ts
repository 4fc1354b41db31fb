// Spot checks: a serving node gets a session that looks like any other (a fresh session id,
// an epoch from the route sequence, no probe flag, greedy sampling, a prompt). A node before
// the last forwards its output to the tracker's own seam endpoint, which poses as the next
// shard: it keeps the hidden states for the check and answers as a last shard would. The last
// shard's sampled token and margin are held to the reference's logits.
import { create } from "@bufbuild/protobuf";
import {
  ElementType,
  HopSchema,
  OpenSchema,
  Phase,
  SampledSchema,
  type SeamFrame,
  SeamFrameSchema,
} from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { answering, replyTo } from "../../src/node/replies.ts";
import { signRoute } from "../../src/route/plan.ts";
import { GREEDY } from "../../src/route/route-session.ts";
import { SeamError } from "../../src/seam/errors.ts";
import { SCHEMA_VERSION } from "../../src/seam/limits.ts";
import type { SeamDialer, SeamServe } from "../../src/seam/link.ts";
import { packTensor, unpackTensor } from "../../src/seam/tensor.ts";
import type { ProbeTarget } from "../../src/tracker/admission/admission.ts";
import { judgeProbe, PROBE_TOLERANCE, type ProbeVerdict } from "../../src/tracker/admission/probe.ts";
import type { ProbeReference, ReferenceProbe } from "../../src/tracker/admission/reference.ts";
import { TRACKER_ISSUER } from "../../src/tracker/core/tracker-core.ts";

/** The tracker's seam endpoint posing as a next shard: it takes only sessions it expects. */
export class SpotSink {
  readonly #expected = new Map<string, (hidden: Float32Array) => void>();

  constructor(private readonly nEmbd: number) {}

  /** Resolves with the hidden states the session's node sends on. */
  expect(sessionId: string, timeoutMs: number): Promise<Float32Array> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#expected.delete(sessionId);
        reject(new SeamError("deadline", "no hidden states reached the tracker"));
      }, timeoutMs);
      this.#expected.set(sessionId, (h) => {
        clearTimeout(timer);
        resolve(h);
      });
    });
  }

  forget(sessionId: string): void {
    this.#expected.delete(sessionId);
  }

  readonly serve: SeamServe = answering((f) => this.#answer(f));

  #answer(f: SeamFrame): SeamFrame {
    const taken = this.#expected.get(f.sessionId);
    if (f.phase === Phase.RELEASE || f.phase === Phase.CANCEL) return replyTo(f, { cacheResult: 0 });
    if (!taken) throw new SeamError("unknown_session", `no session ${f.sessionId} here`);
    if (f.phase === Phase.OPEN) return replyTo(f, { cacheResult: 0 });
    if (f.tensors.length !== 1) throw new SeamError("bad_tensor", "a step carries one tensor");
    const hidden = unpackTensor(f.tensors[0], {
      name: "hidden_states",
      elementType: ElementType.F32,
      cols: this.nEmbd,
    }).values as Float32Array;
    this.#expected.delete(f.sessionId);
    taken(hidden);
    const end = f.positions!.start + f.positions!.count;
    // what any last shard answers: a token, sampled
    return replyTo(f, { cacheResult: end, sampled: create(SampledSchema, { token: 0, margin: 1 }) });
  }
}

/** A spot check of one node; undefined when it says nothing about the node's honesty. */
export async function spotCheck(
  dial: SeamDialer,
  key: CryptoKey,
  ref: ProbeReference,
  sink: { url: string; sink: SpotSink },
  t: ProbeTarget,
  timeoutMs = 60_000,
): Promise<ProbeVerdict | undefined> {
  const sessionId = crypto.randomUUID();
  const epoch = t.epoch ?? 1n;
  const probe = ref.probes[Math.floor(Math.random() * ref.probes.length)];
  const n = probe.tokens.length;
  const last = t.range.end === ref.nLayer;
  const hops = [{ url: t.url, range: t.range }];
  if (!last) hops.push({ url: sink.url, range: { start: t.range.end, end: ref.nLayer } });
  const signed = await signRoute(
    key,
    hops,
    { sessionId, routeEpoch: epoch, artifactSha256: t.artifact },
    timeoutMs,
    TRACKER_ISSUER,
  );
  const base = {
    schemaVersion: SCHEMA_VERSION,
    sessionId,
    routeEpoch: epoch,
    artifactSha256: t.artifact,
    range: t.range,
  };
  const tol = t.engine === ref.engine ? PROBE_TOLERANCE.sameEngine : PROBE_TOLERANCE.otherEngine;
  const forwarded = last ? undefined : sink.sink.expect(sessionId, timeoutMs);
  forwarded?.catch(() => {}); // awaited below, unless the node refuses first
  const link = dial(t.url);
  const timer = setTimeout(() => link.abort("spot check timed out"), timeoutMs);
  try {
    link.send(create(SeamFrameSchema, {
      ...base,
      workId: `${sessionId}/1`,
      phase: Phase.OPEN,
      stepId: 1n,
      open: create(OpenSchema, {
        routeTicket: signed[0].ticket,
        sampling: GREEDY,
        nextHops: signed.slice(1).map((h) =>
          create(HopSchema, { url: h.url, range: h.range, routeTicket: h.ticket })
        ),
        kvCells: n + 16,
      }),
    }));
    link.send(create(SeamFrameSchema, {
      ...base,
      workId: `${sessionId}/2`,
      phase: Phase.PREFILL,
      stepId: 2n,
      positions: { start: 0, count: n },
      chunkIndex: 0,
      chunkCount: 1,
      tensors: [
        t.range.start === 0
          ? packTensor("token_ids", probe.tokens, [n])
          : packTensor("hidden_states", probe.after[t.range.start - 1], [n, ref.nEmbd]),
      ],
    }));
    let answer: SeamFrame | undefined;
    for await (const r of link.replies) {
      // refused or unreachable past it: nothing learned about its outputs
      if (r.status) return undefined;
      if (r.stepId === 2n) {
        answer = r;
        break;
      }
    }
    if (!answer) return undefined;
    link.send(
      create(SeamFrameSchema, { ...base, workId: `${sessionId}/3`, phase: Phase.RELEASE, stepId: 3n }),
    );
    if (forwarded) return judgeProbe(probe.after[t.range.end - 1], await forwarded, tol);
    if (!answer.sampled) {
      return { ok: false, maxAbsDiff: Infinity, allowed: 0, detail: "the last shard sampled nothing" };
    }
    return judgeSample(probe, answer.sampled, tol);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
    sink.sink.forget(sessionId);
    link.close();
  }
}

/**
 * Greedy sampling shows the logits through the top token and its margin over the second:
 * the token must be the reference's (unless the reference itself is within tolerance of a
 * tie) and the margin must match the reference's within the tolerance.
 */
export function judgeSample(
  probe: ReferenceProbe,
  got: { token: number; margin: number },
  relTol: number,
): ProbeVerdict {
  const logits = probe.logits;
  let best = 0;
  let scale = 1;
  for (let i = 0; i < logits.length; i++) {
    if (logits[i] > logits[best]) best = i;
    scale = Math.max(scale, Math.abs(logits[i]));
  }
  let second = -Infinity;
  for (let i = 0; i < logits.length; i++) if (i !== best) second = Math.max(second, logits[i]);
  const margin = logits[best] - second;
  const allowed = relTol * scale;
  const diff = Math.abs(got.margin - margin);
  const tokenOk = got.token === best || margin <= allowed;
  const ok = tokenOk && diff <= allowed;
  return {
    ok,
    maxAbsDiff: diff,
    allowed,
    detail: tokenOk
      ? `margin ${got.margin.toFixed(4)} vs ${margin.toFixed(4)}: |Δ| ${diff.toExponential(2)} ${
        ok ? "≤" : ">"
      } ${allowed.toExponential(2)}`
      : `sampled token ${got.token}, the reference's is ${best} (margin ${margin.toFixed(4)})`,
  };
}
