import { describe, expect, it } from "vitest";
import { PIPELINE_MIN_CHUNK, pipelineChunkFloor, prefillChunkFor } from "../../src/route/prefill-pipeline.ts";
import { PREFILL_CHUNK_TOKENS } from "../../src/seam/limits.ts";

describe("prefill pipeline", () => {
  it("cuts prompts only on routes of two or more shards whose engines all pay per token", () => {
    expect(pipelineChunkFloor(["native-cpu", "native-cpu"])).toBe(PIPELINE_MIN_CHUNK);
    expect(pipelineChunkFloor(["native-cpu", "wasm-cpu", "native-cpu"])).toBe(PIPELINE_MIN_CHUNK);
    expect(pipelineChunkFloor(["native-cpu"])).toBe(0);
    expect(pipelineChunkFloor(["native-cpu", "native-cuda"])).toBe(0);
    expect(pipelineChunkFloor(["wasm-webgpu", "wasm-cpu"])).toBe(0);
    // a hop whose engine is unknown (reached through a relay, no Info)
    expect(pipelineChunkFloor(["native-cpu", ""])).toBe(0);
  });

  it("cuts into at most eight equal chunks, none under the floor, none over the usual chunk", () => {
    expect(prefillChunkFor(64, 16)).toBe(16);
    expect(prefillChunkFor(50, 16)).toBe(17); // 17 + 17 + 16
    // under two floors a prompt stays whole: a chunk costs a pass over the weights
    expect(prefillChunkFor(31, 16)).toBe(31);
    expect(prefillChunkFor(240, 16)).toBe(30);
    expect(prefillChunkFor(5000, 16)).toBe(PREFILL_CHUNK_TOKENS);
    expect(prefillChunkFor(64, 0)).toBe(PREFILL_CHUNK_TOKENS);
  });
});
