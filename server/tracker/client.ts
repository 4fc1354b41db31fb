// A node's membership in a tracker: register (advertising the shard), then heartbeats that
// renew the lease and report load; registers again if the tracker forgot it.
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ShardAdvertSchema } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import type { ShardNode } from "../../src/node/shard-node.ts";
import { importPublicRouteKey } from "../../src/route/keys.ts";
import { log } from "../log/log.ts";

export interface Membership {
  /** the tracker's route key (public): tickets are verified with it */
  readonly routeKey: CryptoKey;
  stop(): void;
}

export function trackerClient(url: string): { client: Client<typeof TrackerService>; close(): void } {
  const sessionManager = new Http2SessionManager(url);
  return {
    client: createClient(TrackerService, createGrpcTransport({ baseUrl: url, sessionManager })),
    close: () => sessionManager.abort(),
  };
}

export async function joinTracker(
  url: string,
  token: string,
  name: string,
  urls: string[],
  shard: MessageInitShape<typeof ShardAdvertSchema>,
  node: () => ShardNode | undefined,
): Promise<Membership> {
  const { client, close } = trackerClient(url);
  const register = async () =>
    await client.register({ token, node: name, urls, shard }, { timeoutMs: 30_000 });
  const reg = await register();
  const routeKey = await importPublicRouteKey(reg.routePublicKey);
  const every = Math.max(200, Math.round(Number(reg.leaseMs) / 3));
  let stopped = false;
  // one beat at a time: a late beat arriving after a newer one would report stale sessions
  let beating = false;
  const beat = async () => {
    if (stopped || beating) return;
    beating = true;
    try {
      const n = node();
      const info = await n?.info();
      const r = await client.heartbeat({
        token,
        node: name,
        sessions: info?.sessions ?? 0,
        // sampled after info(): the freshest list the tracker can get
        sessionIds: n?.sessionIds() ?? [],
        kvCellsUsed: info?.kvCellsUsed ?? 0,
        queued: info?.queued ?? 0,
      }, { timeoutMs: every });
      if (!r.known) await register();
    } catch (e) {
      log.warn("heartbeat failed", { tracker: url, error: e instanceof Error ? e.message : String(e) });
    } finally {
      beating = false;
    }
  };
  const timer = setInterval(() => void beat(), every);
  return {
    routeKey,
    stop: () => {
      stopped = true;
      clearInterval(timer);
      close();
    },
  };
}
