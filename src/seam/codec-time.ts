// What encoding or decoding a frame took, noted by the transport that did it, for the step
// profile: a node reports its frames' codec time in its telemetry.
import type { SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";

const spent = new WeakMap<SeamFrame, number>();

export function noteCodec(frame: SeamFrame, ms: number): void {
  spent.set(frame, ms);
}

/** Milliseconds the transport spent on this frame's bytes (0: a transport that does not say). */
export function codecMs(frame: SeamFrame): number {
  return spent.get(frame) ?? 0;
}
