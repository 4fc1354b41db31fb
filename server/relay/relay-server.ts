// The relay's WebSocket server: it accepts peers whose token proves their name and wires each
// socket to the relay hub (src/relay/hub.ts), which does the routing; here are the transport's
// own parts: the upgrade, the message size limit, pings and the health page.
import * as http from "node:http";
import * as https from "node:https";
import type { Duplex } from "node:stream";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import { admittedPeer, type HubSocket, RelayHub, type RelayStats } from "../../src/relay/hub.ts";
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

export interface Relay {
  readonly url: string;
  stats(): RelayStats;
  close(): Promise<void>;
}

/** One peer's WebSocket as the hub sees it, with what the heartbeat knows of it. */
class PeerSocket implements HubSocket {
  alive = true;
  /** pings in a row it did not answer */
  missed = 0;
  constructor(readonly ws: WebSocket) {}
  send(bytes: Uint8Array, written?: () => void): void {
    this.ws.send(bytes, written);
  }
  close(code: number, reason: string): void {
    this.ws.close(code, reason);
  }
  pause(): void {
    this.ws.pause();
  }
  resume(): void {
    this.ws.resume();
  }
}

export async function startRelay(o: RelayOptions): Promise<Relay> {
  const hub = new RelayHub<PeerSocket>(o.highWaterBytes);
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES + 8192 });

  const health = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.url === "/health") {
      const s = hub.stats();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true, peers: s.peers.length, channels: s.channels }));
    } else res.writeHead(404).end();
  };
  const server = o.tls
    ? https.createServer({ cert: o.tls.cert, key: o.tls.key }, health)
    : http.createServer(health);

  server.on("upgrade", async (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const name = await admittedPeer(o.secret, req.url ?? "/");
    if (!name) {
      socket.end("HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n");
      log.warn("relay refused a peer", { path: new URL(req.url ?? "/", "http://relay").pathname });
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => attach(name, ws));
  });

  function attach(name: string, ws: WebSocket): void {
    const peer = new PeerSocket(ws);
    const conn = hub.join(name, peer);
    log.info("relay peer joined", { peer: name });
    ws.on("pong", () => (peer.alive = true));
    ws.on("message", (data: RawData, isBinary: boolean) => {
      if (!isBinary) return conn.drop();
      conn.receive(new Uint8Array(data as Buffer));
    });
    ws.on("close", () => {
      conn.closed();
      log.info("relay peer left", { peer: name });
    });
  }

  // dead peers (no pong to two pings in a row) are dropped, which fails their channels: one
  // missed interval can be a busy peer (or a busy relay) on a loaded machine
  const heartbeat = setInterval(() => {
    for (const p of hub.sockets()) {
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
    stats: () => hub.stats(),
    close: async () => {
      clearInterval(heartbeat);
      for (const p of hub.sockets()) p.ws.terminate();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
