// The relay's routing, free of any runtime: which peer is connected under which name, and
// for each message, its envelope header read (only that), the sender's name stamped and the
// untouched frame bytes forwarded. A leaving peer fails its channels on the other side; a
// slow receiver pauses its senders. The WebSocket server (server/relay/) and the tests'
// in-memory relay are sockets over this one hub.
import { Kind } from "../gen/strata/relay/v1/relay_pb.ts";
import { decodeEnvelope, encodeEnvelope } from "./envelope.ts";
import { verifyPeerToken } from "./token.ts";

/** What the hub needs from one peer's connection. */
export interface HubSocket {
  /** `written` runs once the bytes have left, so the backlog toward this peer shrinks */
  send(bytes: Uint8Array, written?: () => void): void;
  close(code: number, reason: string): void;
  /** stop reading what this peer sends (its receiver is slow), until resume */
  pause(): void;
  resume(): void;
}

/** The hub's side of one connection: the socket hands it what happens there. */
export interface HubConnection {
  /** a binary message from the peer */
  receive(bytes: Uint8Array): void;
  /** a message that is not even binary: counted and dropped */
  drop(): void;
  /** the connection is gone */
  closed(): void;
}

export interface RelayStats {
  peers: string[];
  /** channels the relay believes open */
  channels: number;
  messages: number;
  bytes: number;
  dropped: number;
  pauses: number;
  /** channels refused: their opener had MAX_CHANNELS_PER_PEER open */
  refused: number;
}

/** Channels one peer may have open through the relay at once; another OPEN is refused. */
export const MAX_CHANNELS_PER_PEER = 1024;

/** The peer a connection request (`/peer?token=…`) proves it is; undefined: refuse it. */
export async function admittedPeer(secret: string, requestUrl: string): Promise<string | undefined> {
  const url = new URL(requestUrl, "http://relay");
  return url.pathname === "/peer"
    ? await verifyPeerToken(secret, url.searchParams.get("token") ?? "")
    : undefined;
}

interface Peer<S> {
  readonly name: string;
  readonly socket: S;
  /** bytes handed to this peer's socket and not yet written */
  pending: number;
  /** senders paused until this peer drains */
  readonly waiting: Set<Peer<S>>;
  /** channels it opened that are not over */
  opened: number;
}

interface Channel {
  readonly opener: string;
  readonly target: string;
  readonly channel: string;
  /** the sides that sent CLOSE */
  readonly closed: Set<string>;
}

export class RelayHub<S extends HubSocket = HubSocket> {
  readonly #high: number;
  readonly #low: number;
  readonly #peers = new Map<string, Peer<S>>();
  /** open channels, for telling the other side when a peer goes: key opener\0channel */
  readonly #channels = new Map<string, Channel>();
  readonly #counts = { messages: 0, bytes: 0, dropped: 0, pauses: 0, refused: 0 };

  /** `highWaterBytes`: bytes queued toward one peer before its senders are paused */
  constructor(highWaterBytes = 8 << 20) {
    this.#high = highWaterBytes;
    this.#low = highWaterBytes / 2;
  }

  /** `name` (proven by its token) is connected on `socket`; an older connection of it is closed. */
  join(name: string, socket: S): HubConnection {
    this.#peers.get(name)?.socket.close(4409, "replaced by a newer connection");
    const peer: Peer<S> = { name, socket, pending: 0, waiting: new Set(), opened: 0 };
    this.#peers.set(name, peer);
    return {
      receive: (bytes) => this.#forward(peer, bytes),
      drop: () => void this.#counts.dropped++,
      closed: () => this.#left(peer),
    };
  }

  /** The sockets of the peers connected now, one per name. */
  sockets(): S[] {
    return [...this.#peers.values()].map((p) => p.socket);
  }

  stats(): RelayStats {
    return { peers: [...this.#peers.keys()], channels: this.#channels.size, ...this.#counts };
  }

  #left(peer: Peer<S>): void {
    const name = peer.name;
    if (this.#peers.get(name) === peer) this.#peers.delete(name);
    for (const w of peer.waiting) w.socket.resume();
    for (const [key, c] of this.#channels) {
      if (c.opener !== name && c.target !== name) continue;
      this.#forget(key);
      const other = this.#peers.get(c.opener === name ? c.target : c.opener);
      other?.socket.send(
        encodeEnvelope({
          to: other.name,
          from: name,
          channel: c.channel,
          kind: Kind.ERROR,
          error: `peer ${name} left the relay`,
        }),
      );
    }
  }

  /** A channel is over: its opener may open another. */
  #forget(key: string): void {
    const c = this.#channels.get(key);
    if (!c) return;
    this.#channels.delete(key);
    const opener = this.#peers.get(c.opener);
    if (opener) opener.opened = Math.max(0, opener.opened - 1);
  }

  #forward(from: Peer<S>, bytes: Uint8Array): void {
    let env;
    try {
      env = decodeEnvelope(bytes);
    } catch {
      return void this.#counts.dropped++;
    }
    const h = env.header;
    if (h.kind === Kind.UNSPECIFIED || !h.channel) return void this.#counts.dropped++;
    const to = this.#peers.get(h.to);
    if (!to) {
      return this.#answer(from, h.to, h.channel, `peer ${h.to} is not connected to this relay`);
    }
    const key = `${from.name}\u0000${h.channel}`;
    if (h.kind === Kind.OPEN && !this.#channels.has(key)) {
      if (from.opened >= MAX_CHANNELS_PER_PEER) {
        this.#counts.refused++;
        return this.#answer(
          from,
          h.to,
          h.channel,
          `resource_exhausted: ${from.opened} channels open through the relay, the most a peer may have`,
        );
      }
      from.opened++;
      this.#channels.set(key, { opener: from.name, target: to.name, channel: h.channel, closed: new Set() });
    }
    if (h.kind === Kind.CLOSE) {
      // a channel is over once both sides closed it: forget it then, not when a peer leaves
      const k = this.#channels.has(key) ? key : `${to.name}\u0000${h.channel}`;
      const c = this.#channels.get(k);
      c?.closed.add(from.name);
      if (c?.closed.size === 2) this.#forget(k);
    }
    if (h.kind === Kind.ERROR) {
      this.#forget(key);
      this.#forget(`${to.name}\u0000${h.channel}`);
    }
    const msg = encodeEnvelope({ ...h, from: from.name }, env.payload);
    this.#counts.messages++;
    this.#counts.bytes += msg.length;
    to.pending += msg.length;
    to.socket.send(msg, () => {
      to.pending -= msg.length;
      if (to.pending <= this.#low && to.waiting.size > 0) {
        for (const w of to.waiting) w.socket.resume();
        to.waiting.clear();
      }
    });
    if (to.pending > this.#high && !to.waiting.has(from)) {
      this.#counts.pauses++;
      to.waiting.add(from);
      from.socket.pause();
    }
  }

  /** The relay's own ERROR to `peer`, on a channel it named toward `about`. */
  #answer(peer: Peer<S>, about: string, channel: string, error: string): void {
    peer.socket.send(encodeEnvelope({ to: peer.name, from: about, channel, kind: Kind.ERROR, error }));
  }
}
