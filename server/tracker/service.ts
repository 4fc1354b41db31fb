// The tracker's Connect service: each call handed to the core as it came; the interceptors
// check node tokens, limit each node's calls, and turn the core's errors into Connect statuses.
import type { ConnectRouter } from "@connectrpc/connect";
import { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import type { TrackerCore } from "../../src/tracker/core/tracker-core.ts";
import { nodeTokenAuth } from "./auth.ts";
import { trackerErrors } from "./errors.ts";
import type { Certify } from "./certify.ts";
import { NODE_CALLS_PER_MIN, nodeCallLimits } from "./call-limits.ts";

/** `nodeCallsPerMin`: the calls one node name may make a minute (0: no limit). */
export function trackerRoutes(
  core: TrackerCore,
  nodeToken: string,
  certify: Certify,
  nodeCallsPerMin = NODE_CALLS_PER_MIN,
) {
  // one set for every router the routes are given to (HTTP/2 and direct calls): a node's call
  // limit counts its calls both ways
  const interceptors = [trackerErrors, nodeTokenAuth(nodeToken), nodeCallLimits(nodeCallsPerMin)];
  return (router: ConnectRouter) =>
    router.service(TrackerService, {
      register: (req) => core.register(req),
      heartbeat: (req) => core.heartbeat(req),
      leave: (req) => core.leave(req),
      done: (req) => core.done(req),
      route: (req) => core.route(req),
      nodes: (req) => core.nodes(req.nodes),
      place: (req) => core.place(req),
      certify: (req) => certify(req),
    }, { interceptors });
}
