// A node's registration checked at the edge, before it is recorded: who it is, that it
// serves this tracker's artifact, that its range exists, and that its engine can hold it.
import { bytesToHex } from "../../bytes/hex.ts";
import { memoryMisfit, type RangeModel, shardMemory } from "../../engine/memory-cap.ts";
import { cutRefusal } from "../../gguf/cut-points.ts";
import type { RegisterRequest } from "../../gen/strata/tracker/v1/tracker_pb.ts";
import { TrackerError } from "../errors.ts";
import type { NodeRecord } from "./storage.ts";

/** The model a tracker routes. */
export interface TrackedModel extends RangeModel {
  /** the artifact's sha256, hex */
  readonly artifact: string;
  readonly nLayer: number;
}

/** The record a valid registration makes ("pending" admission); throws a TrackerError otherwise. */
export function checkRegistration(req: RegisterRequest, model: TrackedModel): NodeRecord {
  const s = req.shard;
  if (!req.node || !s?.range || req.urls.length === 0) {
    throw new TrackerError("invalid_argument", "a registration names the node, its URLs and its shard");
  }
  if (bytesToHex(s.artifactSha256) !== model.artifact) {
    throw new TrackerError(
      "failed_precondition",
      `this tracker routes artifact ${model.artifact.slice(0, 12)}… only`,
    );
  }
  const { start, end } = s.range;
  if (start >= end || end > model.nLayer) {
    throw new TrackerError("invalid_argument", `layers ${start}:${end} of ${model.nLayer}`);
  }
  const refusal = cutRefusal(model.manifest.cuts, start);
  if (refusal) throw new TrackerError("invalid_argument", `layers ${start}:${end}: ${refusal}`);
  // a node is never given a range its memory cap cannot hold. The advert has no batch size or
  // backend: count the least compute any node needs (1 token, fused attention), so the
  // tracker never refuses what the node's own full estimate accepted
  const engine = {
    maxSequences: s.maxSessions,
    batchTokens: 1,
    batchInvariant: s.sessionCells > 0 && s.sessionCells < s.kvCells,
    flashAttention: true,
  };
  const misfit = memoryMisfit(shardMemory(model, s.range, s.kvCells, engine), Number(s.memoryCapBytes));
  if (misfit) {
    throw new TrackerError(
      "resource_exhausted",
      `layers ${start}:${end} with ${s.kvCells} KV cells ${misfit}`,
    );
  }
  return {
    node: req.node,
    urls: [...req.urls],
    artifact: model.artifact,
    start,
    end,
    engine: s.engine,
    kvCells: s.kvCells,
    sessionCells: Math.min(s.sessionCells || s.kvCells, s.kvCells),
    maxSessions: s.maxSessions,
    tokensPerS: s.decodeTokensPerS,
    artifactUrl: s.artifactUrl,
    memoryCapBytes: Number(s.memoryCapBytes),
    admission: "pending",
  };
}
