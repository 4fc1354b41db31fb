// One dialer for every hop kind: direct hops over gRPC, relay hops through this process's
// relay connection (one per relay, opened on first use).
import { RelayPeer } from "../../src/relay/peer.ts";
import { connectRelay } from "../relay/ws-socket.ts";
import { parseHopUrl } from "../../src/route/hop-url.ts";
import { SeamError } from "../../src/seam/errors.ts";
import type { FrameTap, SeamLink } from "../../src/seam/link.ts";
import { AsyncQueue } from "../../src/util/async-queue.ts";
import type { SeamFrame } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { GrpcSeams } from "./grpc.ts";

export class Dialer {
  readonly grpc: GrpcSeams;

  /** `relays` maps a relay URL (ws://host:port) to this process's connection to it. */
  constructor(readonly relays: Map<string, Promise<RelayPeer>>, tap?: FrameTap) {
    this.grpc = new GrpcSeams(tap);
  }

  /** A dialer with this process's connection to a relay, when one is given (named by its token). */
  static async connect(relay?: { url: string; token: string }, tap?: FrameTap): Promise<Dialer> {
    const relays = new Map<string, Promise<RelayPeer>>();
    if (relay) {
      const peer = new RelayPeer(await connectRelay(relay.url, relay.token), relay.token.split(".")[0], tap);
      relays.set(relay.url.replace(/\/$/, ""), Promise.resolve(peer));
    }
    return new Dialer(relays, tap);
  }

  /** The relay connection, when there is exactly one (a node serves its seams on it too). */
  async relayPeer(): Promise<RelayPeer | undefined> {
    const [only] = this.relays.values();
    return this.relays.size === 1 ? await only : undefined;
  }

  /** Closes every HTTP/2 session and relay connection this dialer opened. */
  async close(): Promise<void> {
    this.grpc.close();
    for (const p of this.relays.values()) (await p.catch(() => undefined))?.close();
  }

  readonly dial = (url: string): SeamLink => {
    const hop = parseHopUrl(url);
    if (hop.kind === "direct") return this.grpc.dial(hop.url);
    const peer = this.relays.get(hop.relay);
    if (!peer) {
      throw new SeamError("unavailable", `no connection to relay ${hop.relay} (give --relay and a token)`);
    }
    return deferred(peer.then((p) => p.dial(hop.peer)));
  };
}

/** A link usable at once whose transport is still connecting: frames wait in order. */
function deferred(link: Promise<SeamLink>): SeamLink {
  const replies = new AsyncQueue<SeamFrame>();
  const early: Array<(l: SeamLink) => void> = [];
  let ready: SeamLink | undefined;
  let dead = false;
  link.then(async (l) => {
    ready = l;
    for (const op of early.splice(0)) op(l);
    try {
      for await (const r of l.replies) replies.push(r);
      replies.end();
    } catch (e) {
      replies.fail(e);
    }
  }, (e) => {
    dead = true;
    replies.fail(e);
  });
  const run = (op: (l: SeamLink) => void) => (ready ? op(ready) : early.push(op));
  return {
    send: (f) => {
      if (dead) return false;
      if (ready) return ready.send(f);
      early.push((l) => l.send(f));
      return true;
    },
    replies,
    close: () => run((l) => l.close()),
    abort: (reason) => {
      replies.end();
      run((l) => l.abort(reason));
    },
  };
}
