// A connection to a server's side protocol (listenConnect's `side`: the fast seam on a node's
// port, direct calls on a tracker's): plain TCP for http:// URLs, TLS asking for the side
// protocol by ALPN for https:// ones (Deno only). Deno's own sockets under Deno, node:net under
// Node.
import * as net from "node:net";
import type { ByteDuplex } from "../../src/seam/mux.ts";
import { connDuplex } from "./conn-duplex.ts";
import { socketDuplex } from "./socket-duplex.ts";
import { trustedCa } from "../tls/trust.ts";
import { FAST_ALPN } from "./http2.ts";

/** A side connection that could not be made. `reached`: the server answered (so it does not
 *  take the side protocol), as opposed to not being reachable at all. */
export class SideDialError extends Error {
  constructor(readonly reached: boolean, message: string) {
    super(message);
  }
}

/**
 * The byte connection, and whether the server has been reached (under Node the socket connects
 * after this returns; a failure then ends the duplex). Undefined: a side protocol cannot be
 * asked for over TLS here (Node).
 */
export async function dialSide(
  baseUrl: string,
): Promise<{ duplex: ByteDuplex; reached(): boolean } | undefined> {
  const u = new URL(baseUrl);
  const host = u.hostname.replace(/^\[|\]$/g, "");
  const port = Number(u.port);
  if (u.protocol === "https:") {
    // a server without the side protocol ends the handshake at once; its certificate is
    // checked here as HTTP/2 would
    if (!("Deno" in globalThis)) return undefined;
    const ca = trustedCa();
    let conn: Deno.TlsConn;
    try {
      conn = await Deno.connectTls({
        hostname: host,
        port,
        caCerts: ca ? [ca] : undefined,
        alpnProtocols: [FAST_ALPN],
      });
    } catch (e) {
      throw new SideDialError(false, e instanceof Error ? e.message : String(e));
    }
    try {
      const { alpnProtocol } = await conn.handshake();
      if (alpnProtocol !== FAST_ALPN) throw new Error("the server did not take the side protocol");
    } catch (e) {
      conn.close();
      throw new SideDialError(true, e instanceof Error ? e.message : String(e));
    }
    return { duplex: connDuplex(conn), reached: () => true };
  }
  if ("Deno" in globalThis) {
    try {
      return { duplex: connDuplex(await Deno.connect({ hostname: host, port })), reached: () => true };
    } catch (e) {
      throw new SideDialError(false, e instanceof Error ? e.message : String(e));
    }
  }
  let connected = false;
  const socket = net.connect({ host, port });
  socket.once("connect", () => (connected = true));
  return { duplex: socketDuplex(socket), reached: () => connected };
}
