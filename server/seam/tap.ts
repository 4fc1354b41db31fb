// STRATA_SEAM_TAP=<file>: one line per frame a process sends on a seam (phase, step, size,
// sha256 of the exact bytes), so runs over different transports can be compared.
import { createHash } from "node:crypto";
import { Phase } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { FrameTap } from "../../src/seam/link.ts";

export function fileTap(path: string | undefined): FrameTap | undefined {
  if (!path) return undefined;
  return (bytes, frame) => {
    const digest = createHash("sha256").update(bytes).digest("hex");
    Deno.writeTextFileSync(path, `${Phase[frame.phase]} ${frame.stepId} ${bytes.length} ${digest}\n`, {
      append: true,
    });
  };
}
