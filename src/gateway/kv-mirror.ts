// KV mirroring (gateway --kv-mirror): once a session's prompt is in, each shard of its route sends
// its KV for the prompt's whole blocks to a standby node of its range (a route of other nodes,
// ticketed for the work). When the route then loses a node, the repair prefers the standby of
// that range: it joins from the snapshot, and only the positions past it are rebuilt.
import type { RouteLease } from "./lease.ts";
import { PREFIX_BLOCK_TOKENS, prefixBlocks } from "../route/prefix-keys.ts";
import type { RouteHop } from "../route/route-session.ts";
import { askSnapshot } from "../route/snapshot-request.ts";
import type { SeamDialer } from "../seam/link.ts";

/** What mirroring asks of the gateway. */
export interface MirrorPort {
  /** a route of nodes other than `other` whose tickets name `work`; undefined when none is free */
  standby(work: string, other: readonly string[]): Promise<RouteLease | undefined>;
  /** prompts of fewer whole-block positions are not mirrored: a replay of them is quick anyway */
  readonly minPositions: number;
}

export interface MirrorContext {
  readonly dial: SeamDialer;
  readonly artifact: Uint8Array;
  readonly mirror: MirrorPort;
  readonly log: (message: string, fields: Record<string, unknown>) => void;
}

const hopOf = (h: RouteLease["route"]["hops"][number]): RouteHop => ({
  url: h.url,
  range: h.range!,
  ticket: h.routeTicket,
});

/**
 * Sends the route's KV for `prompt`'s whole blocks (but its last token, as the OPEN offered them)
 * to standby nodes; `took(node)` hears of each standby that kept its snapshot. Never throws:
 * a mirror that could not be made leaves the repair to replay.
 */
export async function mirrorRoute(
  ctx: MirrorContext,
  lease: Pick<RouteLease, "sessionId" | "route">,
  prompt: Int32Array,
  took: (node: string, positions: number) => void,
): Promise<void> {
  const blocks = await prefixBlocks(prompt.subarray(0, prompt.length - 1));
  if (blocks.length * PREFIX_BLOCK_TOKENS < ctx.mirror.minPositions) return;
  const hops = lease.route.hops;
  const standby = await ctx.mirror.standby(`${lease.sessionId}/mirror`, hops.map((h) => h.node)).catch(() =>
    undefined
  );
  if (!standby) return;
  try {
    await Promise.all(hops.map(async (hop) => {
      const to = standby.route.hops.find((h) =>
        h.range?.start === hop.range?.start && h.range?.end === hop.range?.end
      );
      if (!to) return;
      try {
        const positions = await askSnapshot(ctx.dial, {
          sessionId: lease.sessionId,
          epoch: lease.route.epoch,
          artifactSha256: ctx.artifact,
          from: hopOf(hop),
          to: hopOf(to),
          blocks,
        });
        took(to.node, positions);
      } catch (e) {
        ctx.log("a KV snapshot was not mirrored", {
          session: lease.sessionId,
          from: hop.node,
          to: to.node,
          why: e instanceof Error ? e.message : String(e),
        });
      }
    }));
  } finally {
    await standby.end();
  }
}
