// A driver asks a shard of its route to send a session's KV to a standby node of the same range
// (Phase SNAPSHOT, src/node/kv-snapshot.ts): the standby keeps it as a prefix entry, so that a
// repair that puts it in the route rebuilds it only past the snapshot.
import { create } from "@bufbuild/protobuf";
import { Phase, PrefixBlocksSchema, SnapshotSchema } from "../gen/strata/seam/v1/seam_pb.ts";
import { firstAnswer } from "../seam/first-answer.ts";
import type { SeamDialer } from "../seam/link.ts";
import { PREFIX_BLOCK_TOKENS } from "./prefix-keys.ts";
import { hopFrame, type RouteHop } from "./route-session.ts";

export interface SnapshotAsk {
  readonly sessionId: string;
  readonly epoch: bigint;
  readonly artifactSha256: Uint8Array;
  /** the session's hop that sends, with its own ticket */
  readonly from: RouteHop;
  /** the standby node of the same range, with the ticket the tracker gave it for this work */
  readonly to: RouteHop;
  /** the prompt's whole blocks (prefixBlocks): the snapshot holds their positions */
  readonly blocks: readonly Uint8Array[];
}

/** Positions the standby took; throws the refusal of either node. */
export async function askSnapshot(dial: SeamDialer, a: SnapshotAsk, timeoutMs = 120_000): Promise<number> {
  const link = dial(a.from.url);
  try {
    const f = hopFrame(a, a.from, "snapshot", Phase.SNAPSHOT, 0n, {
      nextHops: [{ url: a.to.url, range: a.to.range, routeTicket: a.to.ticket }],
    });
    f.keep = create(PrefixBlocksSchema, { blockTokens: PREFIX_BLOCK_TOKENS, blocks: [...a.blocks] });
    f.snapshot = create(SnapshotSchema, { positions: a.blocks.length * PREFIX_BLOCK_TOKENS });
    link.send(f);
    return (await firstAnswer(link, timeoutMs, a.from.url)).cacheResult;
  } finally {
    link.close();
  }
}
