// The tracker's Connect client (gateways, `strata up`, shard downloads), and a node's way to
// reach it: the TrackerPort the one node runtime (src/node/) keeps its membership through.
// A tracker URL may list replicas ("http://a:7600,http://b:7600"): calls go to one, and move
// to the next when it cannot be reached.
import { type Client, Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import type { TrackerPort } from "../../src/node/membership.ts";
import { clientTrackerPort } from "../../src/node/tracker-port.ts";
import { SessionEnds } from "../../src/tracker/routes/session-ends.ts";
import { nodeTlsOptions } from "../tls/trust.ts";
import { directTransport } from "./direct-transport.ts";

/** The replicas a tracker URL names, in order. */
export function trackerUrls(url: string): string[] {
  const urls = url.split(",").map((u) => u.trim()).filter((u) => u.length > 0);
  if (urls.length === 0) throw new Error(`no tracker URL in "${url}"`);
  return urls;
}

export function trackerClient(url: string): { client: Client<typeof TrackerService>; close(): void } {
  const replicas = trackerUrls(url).map((baseUrl) => {
    const sessionManager = new Http2SessionManager(baseUrl, undefined, nodeTlsOptions());
    // the Connect protocol (binary) over HTTP/2: half the CPU of gRPC per call on both sides
    // (measured, docs/network.md), and every tracker serves it
    const http2 = createConnectTransport({
      baseUrl,
      httpVersion: "2",
      sessionManager,
      useBinaryFormat: true,
    });
    // calls go direct, without HTTP/2, to a tracker that takes them (direct-transport.ts)
    const transport = directTransport(baseUrl, http2);
    return { baseUrl, sessionManager, transport };
  });
  return {
    client: createClient(TrackerService, failover(replicas)),
    close: () =>
      replicas.forEach((r) => {
        r.transport.close();
        r.sessionManager.abort();
      }),
  };
}

/** A replica that cannot be reached (connection refused, or reset under the call): the call
 *  goes to another. */
const unreachable = (e: unknown) =>
  e instanceof ConnectError &&
  (e.code === Code.Unavailable || /ECONNRESET|ECONNREFUSED|EPIPE|socket hang up|GOAWAY/.test(e.rawMessage));

/** Unary calls on the replica in use; on one it cannot reach, the next, each tried once. */
function failover(replicas: readonly { transport: Transport }[]): Transport {
  if (replicas.length === 1) return replicas[0].transport;
  let current = 0;
  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      for (let tried = 0;; tried++) {
        const at = current;
        try {
          return await replicas[at].transport.unary(method, signal, timeoutMs, header, input, contextValues);
        } catch (e) {
          if (!unreachable(e) || tried + 1 >= replicas.length || signal?.aborted) throw e;
          // (no log here: this client also runs under Node, without the server's logger)
          if (current === at) current = (at + 1) % replicas.length;
        }
      }
    },
    stream(method, signal, timeoutMs, header, input, contextValues) {
      return replicas[current].transport.stream(method, signal, timeoutMs, header, input, contextValues);
    },
  };
}

/** A node named `node` registering with the tracker at `url`, presenting its node token. */
export function trackerPort(url: string, token: string, node: string): TrackerPort {
  const { client, close } = trackerClient(url);
  return clientTrackerPort(client, { node, token }, { close });
}

/** Session ends sent through `client` as `Done` calls, batched while one is in flight. */
export function sessionEnds(client: Client<typeof TrackerService>): SessionEnds {
  return new SessionEnds((first, rest) =>
    client.done({ sessionId: first, sessionIds: rest }, { timeoutMs: 5000 }).then(() => {})
  );
}
