// A shard that joins a repaired route starts empty, or with a prefix entry's positions (a KV
// snapshot); the shard before it replays what it sent on past those, as the next shard then
// received it (a q8 seam's rows decoded), in bounded chunks, from its rebuild history
// (rebuild-history.ts).
import { create } from "@bufbuild/protobuf";
import { ElementType, Phase, type SeamFrame, SeamFrameSchema } from "../gen/strata/seam/v1/seam_pb.ts";
import { SeamError } from "../seam/errors.ts";
import { PREFILL_CHUNK_TOKENS, SCHEMA_VERSION } from "../seam/limits.ts";
import { packTensor, unpackTensor } from "../seam/tensor.ts";
import type { NodeSession, Sent } from "./node-session.ts";

export interface RebuildChunk {
  readonly start: number;
  readonly rows: number;
  readonly data: Float32Array;
}

/** The kept outputs from position `from` on, as consecutive chunks of at most maxRows rows (an
 *  entry is split only where `from` falls inside it). */
export function rebuildChunks(
  sent: readonly Sent[],
  nEmbd: number,
  maxRows: number,
  from = 0,
): RebuildChunk[] {
  const chunks: RebuildChunk[] = [];
  let group: Sent[] = [];
  let rows = 0;
  const flush = () => {
    if (!group.length) return;
    const data = new Float32Array(rows * nEmbd);
    let at = 0;
    for (const e of group) {
      const v = unpackTensor(e.tensor, {
        name: "hidden_states",
        elementType: ElementType.F32,
        cols: nEmbd,
        rows: e.rows,
      }).values as Float32Array;
      const skip = Math.max(0, from - e.start) * nEmbd;
      data.set(v.subarray(skip), at);
      at += v.length - skip;
    }
    chunks.push({ start: Math.max(group[0].start, from), rows, data });
    group = [];
    rows = 0;
  };
  for (const e of sent) {
    const n = e.start + e.rows - Math.max(e.start, from);
    if (n <= 0) continue;
    if (rows && rows + n > maxRows) flush();
    group.push(e);
    rows += n;
  }
  flush();
  return chunks;
}

/** What a shard stamps on the rebuild frames it sends: its artifact, its recipe and its seam width. */
export interface RebuildSender {
  readonly artifact: Uint8Array;
  readonly recipe: Uint8Array;
  readonly nEmbd: number;
}

/**
 * After a resuming OPEN: a next shard that joined empty, or with fewer positions from a prefix
 * entry (a KV snapshot), gets this shard's past outputs from there on as rebuild frames, so it
 * holds the same positions. Other mismatches are left for the driver.
 */
export async function catchUp(s: NodeSession, r: SeamFrame, by: RebuildSender): Promise<void> {
  const last = r.hopPositions.length - 1;
  const from = r.hopPositions[last];
  if (last < 0 || from >= s.nextPos || from < s.sentFrom || !s.sent || !s.downstream) return;
  const hop = s.open.nextHops[0];
  const nEmbd = by.nEmbd;
  const chunks = rebuildChunks(s.sent, nEmbd, PREFILL_CHUNK_TOKENS, from);
  try {
    const replies = chunks.map((c, i) =>
      new Promise<SeamFrame>((resolve, reject) => {
        const stepId = ++s.rebuildStep;
        s.rebuilds.set(stepId, { resolve, reject });
        s.downstream!.send(create(SeamFrameSchema, {
          schemaVersion: SCHEMA_VERSION,
          workId: `${s.workId}/rebuild/${stepId}`,
          sessionId: s.id,
          routeEpoch: s.epoch,
          artifactSha256: by.artifact,
          recipeFingerprint: by.recipe,
          range: hop.range,
          phase: Phase.PREFILL,
          positions: { start: c.start, count: c.rows },
          stepId,
          cacheExpect: c.start,
          chunkIndex: i,
          chunkCount: chunks.length,
          rebuild: true,
          tensors: [packTensor("hidden_states", c.data, [c.rows, nEmbd])],
        }));
      })
    );
    await Promise.all(replies);
    r.hopPositions[last] = s.nextPos;
  } catch {
    // left as it was: the driver sees the next shard empty and re-prefills the whole route
  }
}

/** A rebuild frame's reply, climbing back: it settles the wait catchUp keeps for it. */
export function settleRebuild(s: NodeSession, r: SeamFrame): void {
  const w = s.rebuilds.get(r.stepId);
  s.rebuilds.delete(r.stepId);
  if (r.status) w?.reject(new SeamError("unavailable", r.status.message));
  else w?.resolve(r);
}
