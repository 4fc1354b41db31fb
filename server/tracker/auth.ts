// Node authentication: the calls that change what the tracker knows about a node
// (register, heartbeat, leave, place) and a node's certificate (certify) carry the node token. Route, done and nodes do not: the
// gateway asks them without one.
import type { DescMethod } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { checkNodeToken } from "../../src/tracker/membership/node-token.ts";
import { toConnectError } from "./errors.ts";

export const NEEDS_TOKEN: ReadonlySet<DescMethod> = new Set([
  TrackerService.method.register,
  TrackerService.method.heartbeat,
  TrackerService.method.leave,
  TrackerService.method.place,
  TrackerService.method.certify,
]);

/** The request's `token` field (each of NEEDS_TOKEN's requests has one). */
const tokenOf = (m: object): string => "token" in m && typeof m.token === "string" ? m.token : "";

export function nodeTokenAuth(nodeToken: string): Interceptor {
  return (next) => async (req) => {
    if (!req.stream && NEEDS_TOKEN.has(req.method)) {
      try {
        checkNodeToken(tokenOf(req.message), nodeToken);
      } catch (e) {
        throw toConnectError(e);
      }
    }
    return await next(req);
  };
}
