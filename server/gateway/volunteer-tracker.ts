// The tracker's own Connect service, as volunteer tabs reach it: through the gateway, which
// stands in for them. Browsers speak neither h2c nor hold the node token, so each call carries
// the tab's relay token instead; the gateway checks it, names the node by it, puts the node
// token in its place and forwards the call. What a tab may not do (ask for routes, end
// sessions, get a certificate) is refused here. One schema, one service: the tab's client is
// `@connectrpc/connect-web` on the tracker's generated types.
import { Code, ConnectError, createConnectRouter, type ServiceImpl } from "@connectrpc/connect";
import { createFetchHandler } from "@connectrpc/connect/protocol";
import type { Hono } from "hono";
import { bytesToHex } from "../../src/bytes/hex.ts";
import { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { verifyPeerToken } from "../../src/relay/token.ts";
import { relayHopUrl } from "../../src/route/hop-url.ts";
import { WASM32_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";
import { formatRange, layerRange } from "../../src/engine/layer-range.ts";
import type { trackerClient } from "../../node-apis/tracker/client.ts";
import { log } from "../log/log.ts";

/** Where the tabs' Connect client points (its base URL). */
export const VOLUNTEER_CONNECT_PATH = "/volunteer/connect";

export interface VolunteerTrackerOptions {
  /** the relay as tabs reach it: a tab is reachable only there, under its name */
  readonly relayUrl: string;
  /** verifies the tabs' relay tokens */
  readonly relaySecret: string;
  /** the tracker's node token, used on the tabs' behalf */
  readonly nodeToken: string;
  /** the artifact this gateway serves: tabs join for it only */
  readonly artifact: string;
}

type Tracker = ReturnType<typeof trackerClient>["client"];

const MAX_CALL_BYTES = 64 * 1024;
const TIMEOUT_MS = { register: 30_000, other: 10_000 } as const;

/** Serves TrackerService under VOLUNTEER_CONNECT_PATH on `app`. */
export function volunteerTrackerRoutes(app: Hono, tracker: Tracker, o: VolunteerTrackerOptions): void {
  const router = createConnectRouter({ readMaxBytes: MAX_CALL_BYTES, grpc: false, grpcWeb: false });
  router.service(TrackerService, volunteerTrackerService(tracker, o));
  for (const h of router.handlers) {
    const serve = createFetchHandler(h);
    app.post(`${VOLUNTEER_CONNECT_PATH}${h.requestPath}`, (c) => serve(c.req.raw));
  }
}

/** The service a tab calls: each call checked, then forwarded under the node token. */
export function volunteerTrackerService(
  tracker: Tracker,
  o: VolunteerTrackerOptions,
): ServiceImpl<typeof TrackerService> {
  const nameOf = async (token: string): Promise<string> => {
    const name = token ? await verifyPeerToken(o.relaySecret, token) : undefined;
    if (!name) throw new ConnectError("unknown volunteer token", Code.Unauthenticated);
    return name;
  };
  const sameNode = (asked: string, name: string) => {
    if (asked !== "" && asked !== name) {
      throw new ConnectError(`this token names ${name}, not ${asked}`, Code.PermissionDenied);
    }
  };
  const ourArtifact = (sha: Uint8Array) => {
    if (bytesToHex(sha) !== o.artifact) {
      throw new ConnectError("volunteers here host this gateway's model only", Code.InvalidArgument);
    }
  };
  const notForTabs = (what: string) => () =>
    Promise.reject(new ConnectError(`${what} is not a volunteer's call`, Code.PermissionDenied));

  return {
    async register(req) {
      const node = await nameOf(req.token);
      sameNode(req.node, node);
      if (!req.shard?.range) throw new ConnectError("a shard with a range is required", Code.InvalidArgument);
      ourArtifact(req.shard.artifactSha256);
      // a tab is reachable through the relay under its own name, and serves its pieces there only
      const own = relayHopUrl(o.relayUrl, node);
      const r = await tracker.register({
        token: o.nodeToken,
        node,
        urls: [own],
        shard: {
          ...req.shard,
          memoryCapBytes: capped(req.shard.memoryCapBytes),
          artifactUrl: req.shard.artifactUrl === own ? own : "",
        },
      }, { timeoutMs: TIMEOUT_MS.register });
      const { start, end } = req.shard.range;
      log.info("volunteer joined", { node, layers: formatRange(layerRange(start, end)) });
      return r;
    },
    async heartbeat(req) {
      const node = await nameOf(req.token);
      sameNode(req.node, node);
      return await tracker.heartbeat({ ...req, token: o.nodeToken, node }, { timeoutMs: TIMEOUT_MS.other });
    },
    async leave(req) {
      const node = await nameOf(req.token);
      sameNode(req.node, node);
      const r = await tracker.leave({ token: o.nodeToken, node }, { timeoutMs: TIMEOUT_MS.other });
      log.info("volunteer left", { node, known: r.known });
      return r;
    },
    async place(req) {
      const node = await nameOf(req.token);
      sameNode(req.node, node);
      ourArtifact(req.artifactSha256);
      return await tracker.place({
        ...req,
        token: o.nodeToken,
        // a tab cannot move to another range once it holds one: it asks under a name of the
        // ask's own, which the plan holds for one lease, and is counted by what it registers
        // (a fixed range) instead of as a node the plan may move
        node: `${node}-ask`,
        memoryCapBytes: capped(req.memoryCapBytes),
      }, { timeoutMs: TIMEOUT_MS.other });
    },
    // what the network holds now: the tab offers the range fewest nodes hold, and downloads
    // from peers that serve theirs
    nodes: async (req) => await tracker.nodes(req, { timeoutMs: TIMEOUT_MS.other }),
    route: notForTabs("a route"),
    done: notForTabs("ending sessions"),
    certify: notForTabs("a certificate"),
  };
}

/** A tab's engine addresses at most wasm32's 4 GiB, whatever the page says. */
const capped = (bytes: bigint) => {
  const cap = BigInt(WASM32_MEMORY_CAP);
  return bytes > 0n && bytes < cap ? bytes : cap;
};
