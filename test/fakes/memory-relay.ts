// A relay in memory, forwarding as server/relay/relay-server.ts does: it reads the envelope
// header only, stamps the sender's name as `from`, answers an envelope for a peer that is not
// there with an ERROR, and when a peer leaves, fails every channel it was part of on the
// other side. Messages arrive later (a microtask), in order, never inside the sender's call.
import { Kind } from "../../src/gen/strata/relay/v1/relay_pb.ts";
import { decodeEnvelope, encodeEnvelope, type Envelope } from "../../src/relay/envelope.ts";
import type { RelaySocket } from "../../src/relay/peer.ts";

/** One peer's connection; `deliver` hands it raw bytes as if the relay had sent them. */
export interface MemorySocket extends RelaySocket {
  readonly name: string;
  deliver(bytes: Uint8Array): void;
  /** the connection drops (network, relay restart): this side hears it too */
  drop(why?: string): void;
}

export class MemoryRelay {
  readonly #peers = new Map<string, Peer>();
  /** open channels by opener\0channel, as the relay keeps them */
  readonly #channels = new Map<string, { opener: string; target: string; channel: string }>();
  /** every envelope the relay forwarded or answered, as it went out */
  readonly forwarded: Envelope[] = [];
  dropped = 0;

  connect(name: string): MemorySocket {
    const old = this.#peers.get(name);
    const peer = new Peer(name, this);
    this.#peers.set(name, peer);
    old?.lose("4409 replaced by a newer connection");
    return peer.socket;
  }

  get peers(): string[] {
    return [...this.#peers.keys()];
  }

  /** Channels the relay believes open. */
  get channels(): number {
    return this.#channels.size;
  }

  forward(from: Peer, bytes: Uint8Array): void {
    let env: Envelope;
    try {
      env = decodeEnvelope(bytes);
    } catch {
      this.dropped++;
      return;
    }
    const h = env.header;
    if (h.kind === Kind.UNSPECIFIED || !h.channel) {
      this.dropped++;
      return;
    }
    const to = this.#peers.get(h.to);
    if (!to) {
      this.#send(from, {
        to: from.name,
        from: h.to,
        channel: h.channel,
        kind: Kind.ERROR,
        error: `peer ${h.to} is not connected to this relay`,
      });
      return;
    }
    const key = `${from.name}\u0000${h.channel}`;
    if (h.kind === Kind.OPEN) {
      this.#channels.set(key, { opener: from.name, target: to.name, channel: h.channel });
    }
    if (h.kind === Kind.ERROR) {
      this.#channels.delete(key);
      this.#channels.delete(`${to.name}\u0000${h.channel}`);
    }
    this.#send(to, { ...h, from: from.name }, env.payload);
  }

  left(peer: Peer): void {
    if (this.#peers.get(peer.name) === peer) this.#peers.delete(peer.name);
    for (const [key, c] of this.#channels) {
      if (c.opener !== peer.name && c.target !== peer.name) continue;
      this.#channels.delete(key);
      const other = this.#peers.get(c.opener === peer.name ? c.target : c.opener);
      if (other) {
        this.#send(other, {
          to: other.name,
          from: peer.name,
          channel: c.channel,
          kind: Kind.ERROR,
          error: `peer ${peer.name} left the relay`,
        });
      }
    }
  }

  #send(to: Peer, header: Parameters<typeof encodeEnvelope>[0], payload?: Uint8Array): void {
    const bytes = encodeEnvelope(header, payload);
    this.forwarded.push(decodeEnvelope(bytes));
    to.socket.deliver(bytes);
  }
}

class Peer {
  readonly socket: MemorySocket;
  #onMessage?: (bytes: Uint8Array) => void;
  #onClose?: (why: string) => void;
  #gone = false;

  constructor(readonly name: string, readonly relay: MemoryRelay) {
    const lose = (why: string) => this.lose(why);
    this.socket = {
      name,
      send: (bytes) => {
        if (this.#gone) return; // a closed WebSocket drops what it is given
        const copy = bytes.slice();
        queueMicrotask(() => !this.#gone && relay.forward(this, copy));
      },
      close: () => lose("1000 done"),
      onMessage: (h) => (this.#onMessage = h),
      onClose: (h) => (this.#onClose = h),
      deliver: (bytes) => {
        const copy = bytes.slice();
        queueMicrotask(() => !this.#gone && this.#onMessage?.(copy));
      },
      drop: (why = "1006 connection lost") => lose(why),
    };
  }

  lose(why: string): void {
    if (this.#gone) return;
    this.#gone = true;
    this.relay.left(this);
    queueMicrotask(() => this.#onClose?.(why));
  }
}
