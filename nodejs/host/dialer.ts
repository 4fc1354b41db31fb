// Node's dialer: the one Deno nodes use (node-apis/seam/dialer.ts), without a log to tell of
// the relay connection's drops.
import { Dialer } from "../../node-apis/seam/dialer.ts";

export function connectDialer(relay?: { url: string; token: string }): Promise<Dialer> {
  return Dialer.connect(relay);
}
