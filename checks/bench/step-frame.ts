// A decode step's hidden-state frame (one row of n_embd f32) as a route sends it between
// shards: what the codec and transport benchmarks time.
import { create } from "@bufbuild/protobuf";
import { Phase, type SeamFrame, SeamFrameSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { SCHEMA_VERSION } from "../../src/seam/limits.ts";
import { packTensor } from "../../src/seam/tensor.ts";

export function hiddenStepFrame(nEmbd: number): SeamFrame {
  return create(SeamFrameSchema, {
    schemaVersion: SCHEMA_VERSION,
    sessionId: "bench",
    routeEpoch: 1n,
    phase: Phase.DECODE,
    range: { start: 12, end: 30 },
    positions: { start: 64, count: 1 },
    tensors: [packTensor("hidden_states", new Float32Array(nEmbd).map((_, i) => Math.sin(i)), [1, nEmbd])],
  });
}
