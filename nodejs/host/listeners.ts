// Where a Node node's seams arrive: its gRPC (and fast-seam) port, plaintext (seams over TLS
// need Deno's listener), and its channel on the relay.
import type { SeamListener } from "../../src/node/runtime.ts";
import { relayListener } from "../../src/relay/relay-seams.ts";
import type { Dialer } from "../../node-apis/seam/dialer.ts";
import { grpcListener } from "../../node-apis/seam/grpc.ts";

export function seamListeners(
  dialer: Dialer,
  o: { listen?: { host: string; port: number } },
): SeamListener[] {
  const listeners: SeamListener[] = [];
  if (o.listen) listeners.push(grpcListener(o.listen));
  if (dialer.relay) listeners.push(relayListener(dialer.relay.peer, dialer.relay.url));
  return listeners;
}
