// Runs the admission probe against one node over a seam: open (probe), one prefill frame
// with the reference's input for the node's range, its output back, release.
import { create } from "@bufbuild/protobuf";
import {
  ElementType,
  OpenSchema,
  Phase,
  type SeamFrame,
  SeamFrameSchema,
} from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { signRoute } from "../../src/route/plan.ts";
import { SeamError } from "../../src/seam/errors.ts";
import { SCHEMA_VERSION } from "../../src/seam/limits.ts";
import type { SeamDialer } from "../../src/seam/link.ts";
import { packTensor, unpackTensor } from "../../src/seam/tensor.ts";
import type { ProbeTarget } from "../../src/tracker/admission/admission.ts";
import { judgeProbe, PROBE_TOLERANCE, type ProbeVerdict } from "../../src/tracker/admission/probe.ts";
import { TRACKER_ISSUER } from "../../src/tracker/core/tracker-core.ts";
import type { ProbeReference } from "../../src/tracker/admission/reference.ts";

export async function probeNode(
  dial: SeamDialer,
  key: CryptoKey,
  ref: ProbeReference,
  t: ProbeTarget,
  timeoutMs = 60_000,
): Promise<ProbeVerdict> {
  const sessionId = `probe-${t.node}-${crypto.randomUUID()}`;
  const epoch = 1n;
  // a probe the node cannot know in advance
  const probe = ref.probes[Math.floor(Math.random() * ref.probes.length)];
  const n = probe.tokens.length;
  const last = t.range.end === ref.nLayer;
  const base = {
    schemaVersion: SCHEMA_VERSION,
    workId: sessionId,
    sessionId,
    routeEpoch: epoch,
    artifactSha256: t.artifact,
    range: t.range,
  };
  const [{ ticket }] = await signRoute(
    key,
    [{ url: t.url, range: t.range }],
    { sessionId, routeEpoch: epoch, artifactSha256: t.artifact },
    timeoutMs,
    TRACKER_ISSUER,
  );
  const input = t.range.start === 0
    ? packTensor("token_ids", probe.tokens, [n])
    : packTensor("hidden_states", probe.after[t.range.start - 1], [n, ref.nEmbd]);
  const link = dial(t.url);
  const timer = setTimeout(() => link.abort("probe timed out"), timeoutMs);
  try {
    link.send(create(SeamFrameSchema, {
      ...base,
      phase: Phase.OPEN,
      stepId: 1n,
      open: create(OpenSchema, { routeTicket: ticket, kvCells: n, probe: true }),
    }));
    link.send(create(SeamFrameSchema, {
      ...base,
      phase: Phase.PREFILL,
      stepId: 2n,
      positions: { start: 0, count: n },
      chunkIndex: 0,
      chunkCount: 1,
      tensors: [input],
    }));
    let out: SeamFrame | undefined;
    for await (const r of link.replies) {
      if (r.status) throw new SeamError("unavailable", `${r.status.code}: ${r.status.message}`);
      if (r.stepId === 2n) {
        out = r;
        break;
      }
    }
    if (!out || out.tensors.length !== 1) {
      throw new SeamError("malformed", "the probe came back without its output");
    }
    const got = unpackTensor(out.tensors[0], {
      name: last ? "logits" : "hidden_states",
      elementType: ElementType.F32,
      cols: last ? ref.nVocab : ref.nEmbd,
    }).values as Float32Array;
    const want = last ? probe.logits : probe.after[t.range.end - 1];
    const tol = t.engine === ref.engine ? PROBE_TOLERANCE.sameEngine : PROBE_TOLERANCE.otherEngine;
    link.send(create(SeamFrameSchema, { ...base, phase: Phase.RELEASE, stepId: 3n }));
    return judgeProbe(want, got, tol);
  } catch (e) {
    return {
      ok: false,
      maxAbsDiff: Infinity,
      allowed: 0,
      detail: `probe failed: ${e instanceof Error ? e.message : e}`,
    };
  } finally {
    clearTimeout(timer);
    link.close();
  }
}
