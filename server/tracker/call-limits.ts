// Calls that carry the node token (register, heartbeat, leave, place, certify), limited per node
// name: a node beating or re-registering in a loop is refused with resource_exhausted and a
// retry time, and no other node is slowed. (A heartbeat every quarter lease is 4 calls a lease.)
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ClientLimits, NO_CLIENT_LIMITS } from "../../src/gateway/client-limits.ts";
import { NEEDS_TOKEN } from "./auth.ts";

/** The default: 10 calls a second, sustained, for one node name. */
export const NODE_CALLS_PER_MIN = 600;

export function nodeCallLimits(perMin: number): Interceptor {
  const limits = new ClientLimits({ ...NO_CLIENT_LIMITS, requestsPerMin: perMin });
  return (next) => async (req) => {
    if (req.stream || !NEEDS_TOKEN.has(req.method) || !limits.active) return await next(req);
    const node = "node" in req.message && typeof req.message.node === "string" ? req.message.node : "";
    const a = limits.admit(`node:${node}`);
    if (!a.ok) {
      throw new ConnectError(`node ${node}: ${a.why}; retry in ${a.retryAfterS} s`, Code.ResourceExhausted);
    }
    a.release(0);
    return await next(req);
  };
}
