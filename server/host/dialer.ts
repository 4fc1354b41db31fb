// A Deno node's dialer: direct hops over the fast seam (gRPC where a node does not answer it),
// relay hops through its connection to the relay, whose drops and returns go to the log.
import type { FrameTap } from "../../src/seam/link.ts";
import { Dialer } from "../../node-apis/seam/dialer.ts";
import { logRelay } from "../log/log.ts";

export function connectDialer(relay?: { url: string; token: string }, tap?: FrameTap): Promise<Dialer> {
  return Dialer.connect(relay, tap, logRelay);
}
