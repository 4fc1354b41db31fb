// A relay peer as a node runtime's seam adapters: a listener whose hop URL names the peer at
// its relay, and, for hosts that can reach nothing else (a browser tab), a dialer through it.
import type { NodeInfo } from "../gen/strata/seam/v1/seam_pb.ts";
import { parseHopUrl, relayHopUrl } from "../route/hop-url.ts";
import { SeamError } from "../seam/errors.ts";
import type { SeamDialer, SeamServe } from "../seam/link.ts";
import type { RelayPeer } from "./peer.ts";

/** Serves the seams other peers open to `peer`; reachable at relay+ws://relay/peer. */
export function relayListener(peer: RelayPeer, relayUrl: string) {
  return {
    listen: (serve: SeamServe, _info: () => Promise<NodeInfo>) => {
      peer.listen(serve);
      return Promise.resolve([relayHopUrl(relayUrl, peer.name)]);
    },
    // the peer's connection is closed by whoever opened it (it may also carry dialed seams)
    close: () => Promise.resolve(),
  };
}

/** Dials only peers of the same relay: a host that cannot open connections of its own. */
export function relayOnlyDialer(peer: RelayPeer, relayUrl: string): SeamDialer {
  const relay = relayUrl.replace(/\/$/, "");
  return (url) => {
    const hop = parseHopUrl(url);
    if (hop.kind !== "relay" || hop.relay !== relay) {
      throw new SeamError("unavailable", `this node reaches other nodes only through its relay, not ${url}`);
    }
    return peer.dial(hop.peer);
  };
}
