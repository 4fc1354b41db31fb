// A shard that joins a repaired route starts empty; the shard before it replays what it sent
// on before, as the next shard then received it (a q8 seam's rows decoded), in bounded chunks.
import { ElementType } from "../gen/strata/seam/v1/seam_pb.ts";
import { unpackTensor } from "../seam/tensor.ts";
import type { Sent } from "./node-session.ts";

export interface RebuildChunk {
  readonly start: number;
  readonly rows: number;
  readonly data: Float32Array;
}

/** The kept outputs as consecutive chunks of at most maxRows rows (one entry is never split). */
export function rebuildChunks(sent: readonly Sent[], nEmbd: number, maxRows: number): RebuildChunk[] {
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
      data.set(v, at);
      at += v.length;
    }
    chunks.push({ start: group[0].start, rows, data });
    group = [];
    rows = 0;
  };
  for (const e of sent) {
    if (rows && rows + e.rows > maxRows) flush();
    group.push(e);
    rows += e.rows;
  }
  flush();
  return chunks;
}
