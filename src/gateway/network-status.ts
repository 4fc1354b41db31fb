// What the network can serve now, from the tracker's view of its nodes: whether a complete
// route of admitted, live nodes exists, the context it offers, and the sessions it could still
// take. /health and /v1/models say it.
import type { NodeState } from "../gen/strata/tracker/v1/tracker_pb.ts";
import { offeredContext } from "../route/context-window.ts";

export interface NetworkStatus {
  readonly nodesAdmitted: number;
  /** the longest prompt + completion a complete route offers (0: no complete route) */
  readonly contextLength: number;
  /** sessions the network could open now: the layer with the fewest free slots bounds it */
  readonly freeSessions: number;
}

export function networkStatus(nodes: readonly NodeState[], nLayer: number, nCtxTrain: number): NetworkStatus {
  const serving = nodes.filter((n) => n.live && n.admission === "admitted" && n.shard?.range);
  const shards = serving.map((n) => ({
    start: n.shard!.range!.start,
    end: n.shard!.range!.end,
    sessionCells: n.shard!.sessionCells,
    free: Math.max(0, n.shard!.maxSessions - n.load),
  }));
  let freeSessions = Infinity;
  for (let layer = 0; layer < nLayer; layer++) {
    let free = 0;
    for (const s of shards) if (s.start <= layer && layer < s.end) free += s.free;
    freeSessions = Math.min(freeSessions, free);
  }
  const contextLength = offeredContext(shards, nLayer, nCtxTrain);
  return {
    nodesAdmitted: serving.length,
    contextLength,
    freeSessions: contextLength > 0 && Number.isFinite(freeSessions) ? freeSessions : 0,
  };
}
