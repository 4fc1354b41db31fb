// Seam Frames as a driver or an upstream shard sends them, built by hand so a test can get
// every field right, or exactly one wrong.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  Compression,
  HopSchema,
  OpenSchema,
  Phase,
  type SeamFrame,
  SeamFrameSchema,
} from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { RouteHop } from "../../src/route/route-session.ts";
import { GREEDY, type SamplingPolicy } from "../../src/route/route-session.ts";
import { SCHEMA_VERSION } from "../../src/seam/limits.ts";
import { packTensor } from "../../src/seam/tensor.ts";
import { hiddenRows } from "./fake-engine.ts";
import { ARTIFACT } from "./route-keys.ts";

/** Who a frame is for: its session, epoch, the shard it is addressed to. */
export interface Addressed {
  readonly sessionId: string;
  readonly epoch?: bigint;
  readonly range: { readonly start: number; readonly end: number };
  readonly artifact?: Uint8Array;
  /** the engine recipe of the shard that sent it (empty from a driver) */
  readonly recipe?: Uint8Array;
}

// the plain-object form (a whole SeamFrame is accepted by create() too, but cannot be spread)
type Init = Exclude<MessageInitShape<typeof SeamFrameSchema>, SeamFrame>;

export function frame(to: Addressed, phase: Phase, fields: Init = {}): SeamFrame {
  return create(SeamFrameSchema, {
    schemaVersion: SCHEMA_VERSION,
    workId: `${to.sessionId}/${fields.stepId ?? 0}`,
    sessionId: to.sessionId,
    routeEpoch: to.epoch ?? 1n,
    artifactSha256: to.artifact ?? ARTIFACT,
    recipeFingerprint: to.recipe ?? new Uint8Array(0),
    range: { start: to.range.start, end: to.range.end },
    phase,
    ...fields,
  });
}

export interface OpenFields {
  readonly ticket: Uint8Array;
  readonly kvCells: number;
  /** the shards after the receiver, with their own tickets */
  readonly next?: readonly RouteHop[];
  readonly sampling?: SamplingPolicy;
  readonly probe?: boolean;
  /** a driver numbers OPEN 1 */
  readonly stepId?: bigint;
}

export function openFrame(to: Addressed, o: OpenFields): SeamFrame {
  return frame(to, Phase.OPEN, {
    stepId: o.stepId ?? 1n,
    open: create(OpenSchema, {
      routeTicket: o.ticket,
      sampling: o.sampling ?? GREEDY,
      nextHops: (o.next ?? []).map((h) =>
        create(HopSchema, { url: h.url, range: h.range, routeTicket: h.ticket })
      ),
      kvCells: o.kvCells,
      seamCompression: Compression.NONE,
      probe: o.probe ?? false,
    }),
  });
}

export interface StepFields {
  readonly stepId: bigint;
  /** the first position of the step */
  readonly start: number;
  readonly tokens: readonly number[];
  /** prefill (default when several tokens or a chunk is given) or decode */
  readonly phase?: Phase.PREFILL | Phase.DECODE;
  readonly chunkIndex?: number;
  readonly chunkCount?: number;
  /** what the sender expects the shard to hold before this step (default: start) */
  readonly cacheExpect?: number;
}

const phaseOf = (s: StepFields) => s.phase ?? (s.tokens.length > 1 ? Phase.PREFILL : Phase.DECODE);

const stepFields = (s: StepFields): Init => ({
  stepId: s.stepId,
  workId: `step-${s.stepId}`,
  positions: { start: s.start, count: s.tokens.length },
  cacheExpect: s.cacheExpect ?? s.start,
  ...(phaseOf(s) === Phase.PREFILL ? { chunkIndex: s.chunkIndex ?? 0, chunkCount: s.chunkCount ?? 1 } : {}),
});

/** A step for the first shard: token ids. */
export function tokenStep(to: Addressed, s: StepFields): SeamFrame {
  return frame(to, phaseOf(s), {
    ...stepFields(s),
    tensors: [packTensor("token_ids", Int32Array.from(s.tokens), [s.tokens.length])],
  });
}

/** A step for a later shard: the hidden rows the shard before it gives for these tokens. */
export function hiddenStep(to: Addressed, s: StepFields, nEmbd = 8): SeamFrame {
  return frame(to, phaseOf(s), {
    ...stepFields(s),
    tensors: [
      packTensor("hidden_states", hiddenRows(s.tokens, s.start, to.range.start, nEmbd), [
        s.tokens.length,
        nEmbd,
      ]),
    ],
  });
}

export function releaseFrame(
  to: Addressed,
  stepId: bigint,
  phase: Phase.RELEASE | Phase.CANCEL = Phase.RELEASE,
) {
  return frame(to, phase, { stepId, workId: `end-${stepId}` });
}
