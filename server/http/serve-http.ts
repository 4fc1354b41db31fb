// An HTTP/1.1 server for a fetch handler (hono apps): browsers and Range clients speak it.
import type { CertPair } from "../../node-apis/tls/certs.ts";

export interface HttpServer {
  readonly url: string;
  close(): Promise<void>;
}

/** `tls`: HTTPS with this certificate (HTTP/1.1 and h2 by ALPN). */
export function serveHttp(
  handler: (r: Request) => Response | Promise<Response>,
  host: string,
  port: number,
  tls?: CertPair,
): HttpServer {
  const server = Deno.serve({ hostname: host, port, onListen: () => {}, ...tls }, handler);
  return {
    url: `${tls ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${server.addr.port}`,
    close: () => server.shutdown(),
  };
}
