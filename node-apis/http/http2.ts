// Connect services on node:http2 (h2c, or h2 over TLS): gRPC, gRPC-web and Connect on one
// port. Deno.serve cannot carry gRPC trailers.
import * as http2 from "node:http2";
import { Buffer } from "node:buffer";
import { Duplex } from "node:stream";
import * as net from "node:net";
import type { Socket } from "node:net";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { MAX_FRAME_BYTES } from "../../src/seam/limits.ts";
import { type ByteDuplex, MUX_LIMITS, opensWith } from "../../src/seam/mux.ts";
import { connDuplex } from "./conn-duplex.ts";
import { GoawayStrip } from "./goaway-strip.ts";
import { socketDuplex } from "./socket-duplex.ts";
import type { CertPair } from "../tls/certs.ts";

export interface Http2Server {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Another protocol on the same port, told apart by its first bytes: a connection that starts
 * with `preface` is handed over (with what followed it); any other goes to HTTP/2.
 */
export interface SideProtocol {
  readonly preface: Uint8Array;
  /** the connection, the bytes that came after the preface, and whether TLS carries it */
  take(connection: ByteDuplex, head: Uint8Array, tls: boolean): void;
}

/** What one address may hold at a seam server's front: past it, its new connections are
 *  closed at once; a connection that has not said which protocol it speaks in time is dropped. */
export const FRONT_LIMITS = { connectionsPerAddress: 32, prefaceMs: 10_000 } as const;

/** The ALPN name a fast-seam client asks for over TLS (HTTP/2 clients ask for "h2"). */
export const FAST_ALPN = "strata-fast";

/** `tls`: serve over TLS with this certificate (https:// URLs); plaintext h2c without it.
 *  `connectionsPerAddress`: past it, one address's new connections are closed at once (under
 *  Deno; a tracker's nodes may share an address, a seam server's peers need few). */
export function listenConnect(
  routes: (router: ConnectRouter) => void,
  host: string,
  port: number,
  side?: SideProtocol,
  tls?: CertPair,
  connectionsPerAddress: number = FRONT_LIMITS.connectionsPerAddress,
): Promise<Http2Server> {
  const handler = connectNodeAdapter({
    readMaxBytes: MAX_FRAME_BYTES,
    writeMaxBytes: MAX_FRAME_BYTES,
    routes,
  });
  // with a side protocol (a node's fast seam, a tracker's direct calls), one peer's HTTP/2
  // connection carries at most as many streams as a fast-seam connection (Strata's own clients
  // of a tracker, thousands of calls at once, call it directly)
  const settings = side ? { maxConcurrentStreams: MUX_LIMITS.channels } : {};
  // Under Deno every connection comes through Deno's own listener (denoFront), which strips a
  // client's GOAWAY frames: Deno's HTTP/2 server aborts the process on one (goaway-strip.ts).
  // TLS ends at that front, so the HTTP/2 server on loopback stays h2c.
  const deno = "Deno" in globalThis;
  const server = tls && !deno
    ? http2.createSecureServer({ cert: tls.cert, key: tls.key, settings }, handler)
    : http2.createServer({ settings }, handler);
  // Closing drops connections instead of a graceful GOAWAY: Deno 2.9's HTTP/2 client
  // crashes (SIGSEGV) on a GOAWAY about half the time, while a reset is handled fine
  // (docs/seams.md). Clients see the connection end and fail their streams.
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  };
  server.on("connection", track);
  if (deno) return denoFront(server, sockets, side, host, port, tls, connectionsPerAddress);
  if (side && tls) throw new Error("seams over TLS need Deno");
  // with a side protocol a plain TCP server listens and sorts connections by their first bytes
  const front = side
    ? net.createServer((s) => {
      track(s);
      sniff(s, side, server);
    })
    : server;
  return new Promise((resolve, reject) => {
    front.once("error", reject);
    front.listen(port, host, () => {
      const addr = front.address() as { port: number };
      resolve({
        url: urlOf(host, addr.port, tls !== undefined),
        close: () =>
          new Promise<void>((r) => {
            for (const s of sockets) s.destroy();
            if (front !== server) server.close(() => {});
            front.close(() => r());
          }),
      });
    });
  });
}

function sniff(s: Socket, side: SideProtocol, h2: http2.Http2Server): void {
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const opens = opensWith(head, side.preface);
    if (opens === "more") return;
    s.off("data", onData);
    s.pause();
    if (opens === "yes") side.take(socketDuplex(s), head.subarray(side.preface.length), false);
    else h2.emit("connection", replayed(s, head));
    s.resume();
  };
  s.on("data", onData);
  s.on("error", () => s.destroy());
}

/** Copies a client's bytes (after `head`, read already) to the HTTP/2 server, less GOAWAYs. */
async function stripped(from: Deno.Conn, to: Deno.Conn, head: Uint8Array): Promise<void> {
  const strip = new GoawayStrip();
  const buf = new Uint8Array(64 * 1024);
  for (let chunk: Uint8Array | undefined = head; chunk !== undefined;) {
    const pass = strip.take(chunk);
    for (let at = 0; at < pass.length;) at += await to.write(pass.subarray(at));
    const n = await from.read(buf);
    chunk = n === null ? undefined : buf.subarray(0, n);
  }
}

const urlOf = (host: string, port: number, tls: boolean) =>
  `${tls ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${port}`;

/**
 * The socket with the bytes the sniffer read put back in front: Node's HTTP/2 server reads the
 * socket's handle directly and would miss them if they were only unshifted.
 */
function replayed(s: Socket, head: Buffer): Duplex {
  const d = new Duplex({
    read: () => s.resume(),
    write: (chunk, _enc, done) => void s.write(chunk, done),
    final: (done) => void s.end(done),
    destroy: (e, done) => {
      s.destroy(e ?? undefined);
      done(e);
    },
  });
  d.push(head);
  s.on("data", (c: Buffer) => {
    if (!d.push(c)) s.pause();
  });
  s.on("end", () => d.push(null));
  s.on("close", () => d.destroy());
  return d;
}

/**
 * Under Deno the port is Deno's own listener (its sockets are the fast seam's quickest path):
 * a connection that opens with the side protocol's preface is handed over; any other is
 * passed, less its GOAWAY frames, to the HTTP/2 server listening on a loopback port of its own.
 * With `tls` the listener is Deno's TLS one, offering h2 and the fast seam by ALPN; what is
 * sorted and passed on is the decrypted stream. Without a side protocol every connection is
 * HTTP/2.
 */
async function denoFront(
  h2: http2.Http2Server,
  h2Sockets: Set<Socket>,
  side: SideProtocol | undefined,
  host: string,
  port: number,
  tls: CertPair | undefined,
  connectionsPerAddress: number,
): Promise<Http2Server> {
  const inner = await new Promise<number>((resolve, reject) => {
    h2.once("error", reject);
    h2.listen(0, "127.0.0.1", () => resolve((h2.address() as { port: number }).port));
  });
  const listener = tls
    ? Deno.listenTls({
      hostname: host,
      port,
      cert: tls.cert,
      key: tls.key,
      alpnProtocols: side ? ["h2", FAST_ALPN] : ["h2"],
    })
    : Deno.listen({ hostname: host, port });
  /** peers' connections, counted by address; and the ones to the HTTP/2 server inside */
  const conns = new Set<Deno.Conn>();
  const toInner = new Set<Deno.Conn>();
  const perAddress = new Map<string, number>();
  const addressOf = (c: Deno.Conn) => (c.remoteAddr as Deno.NetAddr).hostname;
  const closeQuietly = (c: Deno.Conn) => {
    try {
      c.close();
    } catch {
      // closed already
    }
  };
  const drop = (c: Deno.Conn) => {
    if (conns.delete(c)) {
      const a = addressOf(c);
      const n = (perAddress.get(a) ?? 1) - 1;
      if (n > 0) perAddress.set(a, n);
      else perAddress.delete(a);
    }
    toInner.delete(c);
    closeQuietly(c);
  };
  const admit = (c: Deno.Conn): boolean => {
    const a = addressOf(c);
    const n = perAddress.get(a) ?? 0;
    if (n >= connectionsPerAddress) {
      closeQuietly(c);
      return false;
    }
    perAddress.set(a, n + 1);
    conns.add(c);
    return true;
  };
  /** an HTTP/2 connection, and what was read of it, to the server inside */
  const toHttp2 = async (c: Deno.Conn, head: Uint8Array) => {
    const to = await Deno.connect({ hostname: "127.0.0.1", port: inner });
    toInner.add(to);
    // small frames both ways (a call's request, its answer): without this, Nagle's algorithm
    // and delayed acks hold each for up to 40 ms at one of the two hops
    to.setNoDelay(true);
    if ("setNoDelay" in c) (c as Deno.TcpConn).setNoDelay(true);
    const done = () => (drop(c), drop(to));
    stripped(c, to, head).then(done, done);
    to.readable.pipeTo(c.writable).then(done, done);
  };
  const sortOut = async (c: Deno.Conn) => {
    if (!side) return await toHttp2(c, new Uint8Array(0)).catch(() => drop(c));
    let head = new Uint8Array(0);
    // a peer that connects and says nothing (or stalls its TLS handshake) is let go
    const stalled = setTimeout(() => drop(c), FRONT_LIMITS.prefaceMs);
    try {
      for (let opens = "more"; opens === "more";) {
        const buf = new Uint8Array(4096);
        const n = await c.read(buf);
        if (n === null) return drop(c);
        const joined = new Uint8Array(head.length + n);
        joined.set(head);
        joined.set(buf.subarray(0, n), head.length);
        head = joined;
        opens = opensWith(head, side.preface);
        if (opens === "yes") {
          clearTimeout(stalled);
          const d = connDuplex(c);
          d.onClose(() => drop(c));
          return side.take(d, head.subarray(side.preface.length), tls !== undefined);
        }
      }
      clearTimeout(stalled);
      await toHttp2(c, head);
    } catch {
      clearTimeout(stalled);
      drop(c);
    }
  };
  void (async () => {
    try {
      for await (const c of listener) if (admit(c)) void sortOut(c);
    } catch {
      // the listener closed
    }
  })();
  const addr = listener.addr as Deno.NetAddr;
  return {
    url: urlOf(host, addr.port, tls !== undefined),
    close: () =>
      new Promise<void>((r) => {
        listener.close();
        for (const c of [...conns, ...toInner]) drop(c);
        for (const s of h2Sockets) s.destroy();
        h2.close(() => r());
      }),
  };
}
