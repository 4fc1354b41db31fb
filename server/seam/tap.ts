// STRATA_SEAM_TAP=<file>: one line per frame a process sends on a seam (phase, step, size,
// sha256 of its bytes), so runs over different transports can be compared. Size and digest
// leave out the telemetry a step frame carries forward (times that differ on every run).
import { createHash } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { Phase, SeamFrameSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { FrameTap } from "../../src/seam/link.ts";

export function fileTap(path: string | undefined): FrameTap | undefined {
  if (!path) return undefined;
  return (bytes, frame) => {
    const fixed = frame.telemetry.length
      ? toBinary(SeamFrameSchema, create(SeamFrameSchema, { ...frame, telemetry: [] }))
      : bytes;
    const digest = createHash("sha256").update(fixed).digest("hex");
    Deno.writeTextFileSync(path, `${Phase[frame.phase]} ${frame.stepId} ${fixed.length} ${digest}\n`, {
      append: true,
    });
  };
}
