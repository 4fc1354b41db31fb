// Where a Deno node's seams arrive: its gRPC (and fast-seam) port, over TLS with the
// certificate its tracker signs, and its channel on the relay.
import type { SeamListener } from "../../src/node/runtime.ts";
import { relayListener } from "../../src/relay/relay-seams.ts";
import type { Dialer } from "../../node-apis/seam/dialer.ts";
import { grpcListener } from "../../node-apis/seam/grpc.ts";
import type { CertPair } from "../../node-apis/tls/certs.ts";

export function seamListeners(
  dialer: Dialer,
  o: { listen?: { host: string; port: number }; publicUrl?: string; cert?: CertPair },
): SeamListener[] {
  const listeners: SeamListener[] = [];
  const { cert } = o;
  if (o.listen) listeners.push(grpcListener(o.listen, o.publicUrl, cert && (() => Promise.resolve(cert))));
  if (dialer.relay) listeners.push(relayListener(dialer.relay.peer, dialer.relay.url));
  return listeners;
}
