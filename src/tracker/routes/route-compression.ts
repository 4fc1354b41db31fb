// How a route's seams carry hidden states, by the tracker's policy.
import { Compression } from "../../gen/strata/seam/v1/seam_pb.ts";
import { isRelayHopUrl } from "../../route/hop-url.ts";

/** none: f32; q8: blocks of 32; auto: q8 on routes with a hop through the relay. */
export type SeamCompressionPolicy = "none" | "q8" | "auto";

/** The route's seam encoding under the policy: the relay (WebSocket) is the narrow path. */
export function routeCompression(policy: SeamCompressionPolicy, hopUrls: readonly string[]): Compression {
  if (policy === "q8") return Compression.Q8_BLOCK32;
  if (policy === "none") return Compression.NONE;
  return hopUrls.some(isRelayHopUrl) ? Compression.Q8_BLOCK32 : Compression.NONE;
}
