// What a client sees of a route's failure: the OpenAI error with the status that says whether
// trying again can help.
import { ConnectError } from "@connectrpc/connect";
import { ApiError, RateLimited } from "./openai.ts";
import { ClientLeft, QueueRefused } from "./request-queue.ts";
import { SeamError } from "../seam/errors.ts";

/** Maps a route failure to the OpenAI error a client sees. */
export function routeError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof QueueRefused) return new RateLimited(e.message, e.retryAfterS);
  if (e instanceof ClientLeft) return new ApiError(499, e.message, "server_error", "cancelled");
  if (e instanceof ConnectError) {
    return new ApiError(503, `no route: ${e.rawMessage}`, "server_error", "no_route");
  }
  if (e instanceof SeamError) {
    if (e.code === "kv_full" || e.code === "overloaded" || e.code === "context_full") {
      return new ApiError(503, e.message, "server_error", e.code);
    }
    if (e.code === "cancelled") return new ApiError(499, e.message, "server_error", "cancelled");
    return new ApiError(502, `the route failed: ${e.code}: ${e.message}`, "server_error", "route_failed");
  }
  return new ApiError(500, e instanceof Error ? e.message : String(e), "server_error");
}
