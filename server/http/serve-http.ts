// An HTTP/1.1 server for a fetch handler (hono apps): browsers and Range clients speak it.
export interface HttpServer {
  readonly url: string;
  close(): Promise<void>;
}

export function serveHttp(
  handler: (r: Request) => Response | Promise<Response>,
  host: string,
  port: number,
): HttpServer {
  const server = Deno.serve({ hostname: host, port, onListen: () => {} }, handler);
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${server.addr.port}`,
    close: () => server.shutdown(),
  };
}
