// `strata node --layers auto`: the node tells the tracker what its engine can hold and how it
// runs, and the tracker answers the range to load.
import { hexToBytes } from "../../src/bytes/hex.ts";
import { type LayerRange, layerRange } from "../../src/engine/layer-range.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";

export interface PlaceAsk {
  readonly node: string;
  /** sha256, hex */
  readonly artifact: string;
  readonly capBytes: number;
  /** e.g. "native-cpu" */
  readonly engine: string;
  readonly kvCells: number;
  readonly maxSequences: number;
  readonly batchTokens: number;
  readonly batchInvariant: boolean;
  readonly flashAttention: boolean;
}

export async function placedRange(
  url: string,
  token: string,
  a: PlaceAsk,
  nLayer: number,
): Promise<LayerRange> {
  const t = trackerClient(url);
  try {
    const r = await t.client.place({
      token,
      node: a.node,
      artifactSha256: hexToBytes(a.artifact),
      // the most a machine could report fits in 2^53
      memoryCapBytes: BigInt(Math.min(a.capBytes, Number.MAX_SAFE_INTEGER)),
      engine: a.engine,
      kvCells: a.kvCells,
      maxSessions: a.maxSequences,
      batchTokens: a.batchTokens,
      batchInvariant: a.batchInvariant,
      flashAttention: a.flashAttention,
    }, { timeoutMs: 30_000 });
    if (!r.range) throw new Error("the tracker placed this node nowhere");
    return layerRange(r.range.start, r.range.end, nLayer);
  } finally {
    t.close();
  }
}
