// Replies a node sends back up a seam: acknowledgements, refusals and session failures.
// A reply names the frame it answers by step id, so a driver can match it.
import { create } from "@bufbuild/protobuf";
import { Phase, type SeamFrame, SeamFrameSchema, StatusSchema } from "../gen/strata/seam/v1/seam_pb.ts";
import { SCHEMA_VERSION } from "../seam/limits.ts";
import type { SeamServe } from "../seam/link.ts";

type Fields = Partial<
  Pick<
    SeamFrame,
    | "cacheResult"
    | "telemetry"
    | "sampled"
    | "status"
    | "tensors"
    | "rebuild"
    | "hopPositions"
    | "hopReused"
    | "crossings"
  >
>;

export function replyTo(f: SeamFrame, fields: Fields = {}): SeamFrame {
  return create(SeamFrameSchema, {
    schemaVersion: SCHEMA_VERSION,
    workId: f.workId,
    sessionId: f.sessionId,
    routeEpoch: f.routeEpoch,
    range: f.range,
    phase: f.phase,
    positions: f.positions,
    stepId: f.stepId,
    chunkIndex: f.chunkIndex,
    chunkCount: f.chunkCount,
    // answers to rebuild frames (refusals too) go to the shard that sent them, not up the route
    rebuild: f.rebuild,
    ...fields,
  });
}

/** A seam endpoint that answers each frame on its own: a refusal for one it throws on. */
export function answering(answer: (f: SeamFrame) => SeamFrame): SeamServe {
  return async (frames, reply) => {
    for await (const f of frames) {
      try {
        reply(answer(f));
      } catch (e) {
        reply(refusal(f, e));
      }
    }
  };
}

export function errorCode(e: unknown): string {
  const code = (e as { code?: unknown })?.code;
  return typeof code === "string" ? code : "internal";
}

export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The refusal of one frame: the session (if any) goes on. */
export function refusal(f: SeamFrame, e: unknown): SeamFrame {
  return replyTo(f, { status: create(StatusSchema, { code: errorCode(e), message: errorText(e) }) });
}

/** The end of a session the node could not keep (step id 0: it answers no single frame). */
export function sessionFailure(
  id: { sessionId: string; routeEpoch: bigint; workId: string },
  code: string,
  message: string,
): SeamFrame {
  return create(SeamFrameSchema, {
    schemaVersion: SCHEMA_VERSION,
    workId: id.workId,
    sessionId: id.sessionId,
    routeEpoch: id.routeEpoch,
    phase: Phase.CANCEL,
    status: create(StatusSchema, { code, message }),
  });
}

/** Tensor payload bytes of a frame (what a seam spends on activations). */
export function tensorBytes(f: SeamFrame): number {
  let n = 0;
  for (const t of f.tensors) n += t.data.length + t.rowScales.length;
  return n;
}
