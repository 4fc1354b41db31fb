// The relay: a WebSocket hub for peers that cannot accept connections. It authenticates
// each peer by token, reads only the envelope header of each message, stamps the sender's
// name and forwards the untouched frame bytes; a slow receiver pauses its senders.
import * as http from "node:http";
import * as https from "node:https";
import type { Duplex } from "node:stream";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import { Kind } from "../../src/gen/strata/relay/v1/relay_pb.ts";
import { decodeEnvelope, encodeEnvelope } from "../../src/relay/envelope.ts";
import { verifyPeerToken } from "../../src/relay/token.ts";
import { MAX_FRAME_BYTES } from "../../src/seam/limits.ts";
import { log } from "../log/log.ts";
import type { CertPair } from "../../node-apis/tls/certs.ts";

export interface RelayOptions {
  readonly host: string;
  readonly port: number;
  readonly secret: string;
  /** bytes queued toward one peer before its senders are paused */
  readonly highWaterBytes?: number;
  /** serve wss:// with this certificate (ws:// without it) */
  readonly tls?: CertPair;
}

export interface RelayStats {
  peers: string[];
  messages: number;
  bytes: number;
  dropped: number;
  pauses: number;
  /** channels refused: their opener had MAX_CHANNELS_PER_PEER open */
  refused: number;
}

export interface Relay {
  readonly url: string;
  stats(): RelayStats;
  close(): Promise<void>;
}

interface Peer {
  readonly name: string;
  readonly ws: WebSocket;
  /** bytes handed to this peer's socket and not yet written */
  pending: number;
  /** senders paused until this peer drains */
  readonly waiting: Set<Peer>;
  alive: boolean;
  /** pings in a row it did not answer */
  missed: number;
  /** channels it opened that are not over */
  opened: number;
}

/** Channels one peer may have open through the relay at once; another OPEN is refused. */
export const MAX_CHANNELS_PER_PEER = 1024;

export async function startRelay(o: RelayOptions): Promise<Relay> {
  const high = o.highWaterBytes ?? 8 << 20;
  const low = high / 2;
  const peers = new Map<string, Peer>();
  /** open channels, for telling the other side when a peer goes: key opener\0channel */
  const channels = new Map<
    string,
    { opener: string; target: string; channel: string; closed: Set<string> }
  >();
  const stats = { messages: 0, bytes: 0, dropped: 0, pauses: 0, refused: 0 };
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES + 8192 });

  const health = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.url === "/health") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true, peers: peers.size, channels: channels.size }));
    } else res.writeHead(404).end();
  };
  const server = o.tls
    ? https.createServer({ cert: o.tls.cert, key: o.tls.key }, health)
    : http.createServer(health);

  server.on("upgrade", async (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? "/", "http://relay");
    const name = url.pathname === "/peer"
      ? await verifyPeerToken(o.secret, url.searchParams.get("token") ?? "")
      : undefined;
    if (!name) {
      socket.end("HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n");
      log.warn("relay refused a peer", { path: url.pathname });
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => attach(name, ws));
  });

  function attach(name: string, ws: WebSocket): void {
    peers.get(name)?.ws.close(4409, "replaced by a newer connection");
    const peer: Peer = { name, ws, pending: 0, waiting: new Set(), alive: true, missed: 0, opened: 0 };
    peers.set(name, peer);
    log.info("relay peer joined", { peer: name });
    ws.on("pong", () => (peer.alive = true));
    ws.on("message", (data: RawData, isBinary: boolean) => {
      if (!isBinary) return void stats.dropped++;
      forward(peer, new Uint8Array(data as Buffer));
    });
    ws.on("close", () => {
      if (peers.get(name) === peer) peers.delete(name);
      for (const w of peer.waiting) w.ws.resume();
      for (const [key, c] of channels) {
        if (c.opener !== name && c.target !== name) continue;
        forget(key);
        const other = peers.get(c.opener === name ? c.target : c.opener);
        other?.ws.send(encodeEnvelope({
          to: other.name,
          from: name,
          channel: c.channel,
          kind: Kind.ERROR,
          error: `peer ${name} left the relay`,
        }));
      }
      log.info("relay peer left", { peer: name });
    });
  }

  /** A channel is over: its opener may open another. */
  function forget(key: string): void {
    const c = channels.get(key);
    if (!c) return;
    channels.delete(key);
    const opener = peers.get(c.opener);
    if (opener) opener.opened = Math.max(0, opener.opened - 1);
  }

  function forward(from: Peer, bytes: Uint8Array): void {
    let env;
    try {
      env = decodeEnvelope(bytes);
    } catch {
      return void stats.dropped++;
    }
    const h = env.header;
    if (h.kind === Kind.UNSPECIFIED || !h.channel) return void stats.dropped++;
    const to = peers.get(h.to);
    if (!to) {
      from.ws.send(encodeEnvelope({
        to: from.name,
        from: h.to,
        channel: h.channel,
        kind: Kind.ERROR,
        error: `peer ${h.to} is not connected to this relay`,
      }));
      return;
    }
    const key = `${from.name}\u0000${h.channel}`;
    if (h.kind === Kind.OPEN && !channels.has(key)) {
      if (from.opened >= MAX_CHANNELS_PER_PEER) {
        stats.refused++;
        from.ws.send(encodeEnvelope({
          to: from.name,
          from: h.to,
          channel: h.channel,
          kind: Kind.ERROR,
          error:
            `resource_exhausted: ${from.opened} channels open through the relay, the most a peer may have`,
        }));
        return;
      }
      from.opened++;
      channels.set(key, { opener: from.name, target: to.name, channel: h.channel, closed: new Set() });
    }
    if (h.kind === Kind.CLOSE) {
      // a channel is over once both sides closed it: forget it then, not when a peer leaves
      const k = channels.has(key) ? key : `${to.name}\u0000${h.channel}`;
      const c = channels.get(k);
      c?.closed.add(from.name);
      if (c?.closed.size === 2) forget(k);
    }
    if (h.kind === Kind.ERROR) {
      forget(key);
      forget(`${to.name}\u0000${h.channel}`);
    }
    const msg = encodeEnvelope({ ...h, from: from.name }, env.payload);
    stats.messages++;
    stats.bytes += msg.length;
    to.pending += msg.length;
    to.ws.send(msg, () => {
      to.pending -= msg.length;
      if (to.pending <= low && to.waiting.size > 0) {
        for (const w of to.waiting) w.ws.resume();
        to.waiting.clear();
      }
    });
    if (to.pending > high && !to.waiting.has(from)) {
      stats.pauses++;
      to.waiting.add(from);
      from.ws.pause();
    }
  }

  // dead peers (no pong to two pings in a row) are dropped, which fails their channels: one
  // missed interval can be a busy peer (or a busy relay) on a loaded machine
  const heartbeat = setInterval(() => {
    for (const p of peers.values()) {
      if (!p.alive && ++p.missed >= 2) p.ws.terminate();
      else {
        if (p.alive) p.missed = 0;
        p.alive = false;
        p.ws.ping();
      }
    }
  }, 15_000);

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    url: `${o.tls ? "wss" : "ws"}://${o.host}:${port}`,
    stats: () => ({ peers: [...peers.keys()], channels: channels.size, ...stats }),
    close: async () => {
      clearInterval(heartbeat);
      for (const p of peers.values()) p.ws.terminate();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
