// What a shard node says about itself (Info, which heartbeats and the network view read): its
// artifact and range, its engine's memory, its batcher's counts and its own seam counters.
import { create } from "@bufbuild/protobuf";
import { type NodeInfo, NodeInfoSchema } from "../gen/strata/seam/v1/seam_pb.ts";
import type { RangeEngine } from "../engine/range-engine.ts";
import { engineLabel } from "../engine/recipe.ts";
import type { Batcher } from "../scheduler/batcher.ts";

/** What the node counts as frames cross it. */
export interface NodeCounters {
  bytesIn: number;
  bytesOut: number;
  refused: number;
  served: number;
  snapshotsSent: number;
  snapshotsTaken: number;
  snapshotsRefused: number;
}

export const newCounters = (): NodeCounters => ({
  bytesIn: 0,
  bytesOut: 0,
  refused: 0,
  served: 0,
  snapshotsSent: 0,
  snapshotsTaken: 0,
  snapshotsRefused: 0,
});

/** Who the node is, as Info names it. */
export interface InfoIdentity {
  readonly nodeId: string;
  readonly artifactSha256: Uint8Array;
  readonly limits: { readonly kvCells: number };
}

export async function nodeInfo(
  engine: RangeEngine,
  batcher: Batcher,
  id: InfoIdentity,
  counters: NodeCounters,
): Promise<NodeInfo> {
  const f = engine.facts;
  const m = await engine.memory();
  const b = batcher.stats();
  return create(NodeInfoSchema, {
    node: id.nodeId,
    artifactSha256: id.artifactSha256,
    recipeFingerprint: engine.recipe,
    range: { start: f.range.start, end: f.range.end },
    nLayer: f.nLayer,
    nEmbd: f.seamWidth,
    nVocab: f.nVocab,
    engine: engineLabel(engine),
    kvCells: id.limits.kvCells,
    kvCellsUsed: m.kvCellsUsed,
    kvCellsReserved: b.reservedCells,
    sessions: b.sessions,
    maxSessions: m.maxSequences,
    queued: b.queued,
    batches: BigInt(b.batches),
    graphPasses: BigInt(b.graphPasses),
    kvLayout: m.kvLayout,
    weightBytes: BigInt(m.weightBytes),
    kvBytes: BigInt(m.kvBytes),
    computeBytes: BigInt(m.computeBytes),
    engineMs: b.engineMs,
    lastBatchSessions: b.lastBatchSessions,
    maxBatchSessions: b.maxBatchSessions,
    prefillTokens: BigInt(b.prefillTokens),
    decodeTokens: BigInt(b.decodeTokens),
    seamBytesIn: BigInt(counters.bytesIn),
    seamBytesOut: BigInt(counters.bytesOut),
    refusedFrames: BigInt(counters.refused),
    sessionsServed: BigInt(counters.served),
    soloTokensPerS: b.soloTokensPerS,
    prefix: b.prefix && {
      ...b.prefix,
      hits: BigInt(b.prefix.hits),
      misses: BigInt(b.prefix.misses),
      tokensReused: BigInt(b.prefix.tokensReused),
      evictions: BigInt(b.prefix.evictions),
      snapshotsSent: BigInt(counters.snapshotsSent),
      snapshotsTaken: BigInt(counters.snapshotsTaken),
      snapshotsRefused: BigInt(counters.snapshotsRefused),
    },
  });
}
