// A shard that joins a repaired route starts empty, or with a prefix entry's positions (a KV
// snapshot); the shard before it replays what it sent on past those, as the next shard then
// received it (a q8 seam's rows decoded), in bounded chunks.
import { ElementType } from "../gen/strata/seam/v1/seam_pb.ts";
import { unpackTensor } from "../seam/tensor.ts";
import type { Sent } from "./node-session.ts";

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
