// The tracker's Connect client (gateways, `strata up`, shard downloads), and a node's way to
// reach it: the TrackerPort the one node runtime (src/node/) keeps its membership through.
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import type { TrackerPort } from "../../src/node/membership.ts";

export function trackerClient(url: string): { client: Client<typeof TrackerService>; close(): void } {
  const sessionManager = new Http2SessionManager(url);
  return {
    client: createClient(TrackerService, createGrpcTransport({ baseUrl: url, sessionManager })),
    close: () => sessionManager.abort(),
  };
}

/** A node named `node` registering with the tracker at `url`, presenting its node token. */
export function trackerPort(url: string, token: string, node: string): TrackerPort {
  const { client, close } = trackerClient(url);
  return {
    register: async (urls, shard) => {
      const r = await client.register({ token, node, urls, shard }, { timeoutMs: 30_000 });
      return { leaseMs: Number(r.leaseMs), routePublicKey: r.routePublicKey };
    },
    heartbeat: async (load, timeoutMs) => await client.heartbeat({ token, node, ...load }, { timeoutMs }),
    leave: async () => void await client.leave({ token, node }, { timeoutMs: 5000 }),
    close,
  };
}
