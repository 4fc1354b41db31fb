// A node's TrackerPort over the tracker's Connect client, whichever transport carries it (HTTP/2
// from a server, fetch from a tab through the gateway): every call names the node and presents
// its token.
import type { Client } from "@connectrpc/connect";
import type { TrackerService } from "../gen/strata/tracker/v1/tracker_pb.ts";
import type { TrackerPort } from "./membership.ts";

type TrackerClient = Client<typeof TrackerService>;

export interface PortIdentity {
  readonly node: string;
  /** the node token (a tab: its relay token, which the gateway swaps) */
  readonly token: string;
}

export function clientTrackerPort(
  client: TrackerClient,
  { node, token }: PortIdentity,
  o: {
    /** a page going away cannot wait: its leave is only sent, on this client (keepalive) */
    readonly parting?: TrackerClient;
    readonly close?: () => void;
  } = {},
): TrackerPort {
  return {
    register: async (urls, shard) => {
      const r = await client.register({ token, node, urls, shard }, { timeoutMs: 30_000 });
      return { leaseMs: Number(r.leaseMs), routePublicKey: r.routePublicKey };
    },
    heartbeat: async (load, timeoutMs) => await client.heartbeat({ token, node, ...load }, { timeoutMs }),
    leave: async () => {
      if (!o.parting) return void await client.leave({ token, node }, { timeoutMs: 5000 });
      void o.parting.leave({ token, node }).catch(() => {});
    },
    close: () => o.close?.(),
  };
}
