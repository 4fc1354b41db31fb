// One dialer for every hop kind: direct hops over the fast seam (gRPC where a node does not
// answer it), relay hops through this process's connection to the relay.
import { RelayPeer } from "../../src/relay/peer.ts";
import { parseHopUrl } from "../../src/route/hop-url.ts";
import { SeamError } from "../../src/seam/errors.ts";
import type { FrameTap, SeamLink } from "../../src/seam/link.ts";
import { connectRelay } from "../relay/ws-socket.ts";
import { FastSeams } from "./fast.ts";
import { GrpcSeams, seamTransport } from "./grpc.ts";

export class Dialer {
  readonly grpc: GrpcSeams;
  /** direct hops go over the fast seam first (unless STRATA_SEAM_TRANSPORT=grpc) */
  readonly fast?: FastSeams;

  /** `relay`: this process's open connection to a relay (ws://host:port), if it has one. */
  private constructor(readonly relay: { url: string; peer: RelayPeer } | undefined, tap?: FrameTap) {
    this.grpc = new GrpcSeams(tap);
    if (seamTransport() === "tcp") this.fast = new FastSeams((url) => this.grpc.dial(url), tap);
  }

  /** A dialer with a connection to the relay, when one is given (the peer is named by its token);
   *  `onRelay` hears the connection drop and come back (this file runs under Node too: no log here). */
  static async connect(
    relay?: { url: string; token: string },
    tap?: FrameTap,
    onRelay?: (state: "down" | "up", detail: string) => void,
  ): Promise<Dialer> {
    if (!relay) return new Dialer(undefined, tap);
    const name = relay.token.split(".")[0];
    // a dropped relay connection is dialed again: the node serves on through it without a restart
    const peer = new RelayPeer(await connectRelay(relay.url, relay.token), name, tap, {
      connect: () => connectRelay(relay.url, relay.token),
      onChange: onRelay,
    });
    return new Dialer({ url: relay.url.replace(/\/$/, ""), peer }, tap);
  }

  /** Closes every HTTP/2 session and the relay connection this dialer opened. */
  close(): void {
    this.fast?.close();
    this.grpc.close();
    this.relay?.peer.close();
  }

  readonly dial = (url: string): SeamLink => {
    const hop = parseHopUrl(url);
    if (hop.kind === "direct") {
      return this.fast ? this.fast.dial(hop.url) : this.grpc.dial(hop.url);
    }
    if (hop.relay !== this.relay?.url) {
      throw new SeamError("unavailable", `no connection to relay ${hop.relay} (give --relay and a token)`);
    }
    return this.relay.peer.dial(hop.peer);
  };
}
