// A relay in memory: the real relay hub (src/relay/hub.ts) with each peer's connection an
// in-memory pair of ends, the peer's (a RelaySocket) and the hub's. Messages arrive later (a
// microtask), in order, never inside the sender's call.
import { decodeEnvelope, type Envelope } from "../../src/relay/envelope.ts";
import { type HubConnection, type HubSocket, RelayHub } from "../../src/relay/hub.ts";
import type { RelaySocket } from "../../src/relay/peer.ts";

/** One peer's connection; `deliver` hands it raw bytes as if the relay had sent them. */
export interface MemorySocket extends RelaySocket {
  readonly name: string;
  deliver(bytes: Uint8Array): void;
  /** the connection drops (network, relay restart): this side hears it too */
  drop(why?: string): void;
}

export class MemoryRelay {
  readonly #hub: RelayHub;
  /** every envelope the relay forwarded or answered, as it went out */
  readonly forwarded: Envelope[] = [];

  /** `highWaterBytes`: as the relay's option (bytes queued toward a peer before its senders pause) */
  constructor(highWaterBytes?: number) {
    this.#hub = new RelayHub(highWaterBytes);
  }

  connect(name: string): MemorySocket {
    return new MemoryConnection(name, this.#hub, this.forwarded).socket;
  }

  get peers(): string[] {
    return this.#hub.stats().peers;
  }

  /** Channels the relay believes open. */
  get channels(): number {
    return this.#hub.stats().channels;
  }

  get dropped(): number {
    return this.#hub.stats().dropped;
  }
}

class MemoryConnection {
  readonly socket: MemorySocket;
  readonly #hub: HubConnection;
  #onMessage?: (bytes: Uint8Array) => void;
  #onClose?: (why: string) => void;
  #gone = false;
  /** the hub paused reading this peer: what it sends waits here */
  #paused = false;
  readonly #held: Uint8Array[] = [];

  constructor(name: string, hub: RelayHub, forwarded: Envelope[]) {
    this.socket = {
      name,
      send: (bytes) => {
        if (this.#gone) return; // a closed WebSocket drops what it is given
        const copy = bytes.slice();
        queueMicrotask(() => this.#read(copy));
      },
      close: () => this.#lose("1000 done"),
      onMessage: (h) => (this.#onMessage = h),
      onClose: (h) => (this.#onClose = h),
      deliver: (bytes) => {
        const copy = bytes.slice();
        queueMicrotask(() => !this.#gone && this.#onMessage?.(copy));
      },
      drop: (why = "1006 connection lost") => this.#lose(why),
    };
    const end: HubSocket = {
      send: (bytes, written) => {
        forwarded.push(decodeEnvelope(bytes));
        this.socket.deliver(bytes);
        if (written) queueMicrotask(written);
      },
      close: (code, reason) => this.#lose(`${code} ${reason}`),
      pause: () => (this.#paused = true),
      resume: () => {
        this.#paused = false;
        while (!this.#paused && this.#held.length > 0) this.#hub.receive(this.#held.shift()!);
      },
    };
    this.#hub = hub.join(name, end);
  }

  #read(bytes: Uint8Array): void {
    if (this.#gone) return;
    if (this.#paused || this.#held.length > 0) this.#held.push(bytes);
    else this.#hub.receive(bytes);
  }

  #lose(why: string): void {
    if (this.#gone) return;
    this.#gone = true;
    this.#held.length = 0;
    this.#hub.closed();
    queueMicrotask(() => this.#onClose?.(why));
  }
}
