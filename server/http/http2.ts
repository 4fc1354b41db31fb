// Connect services on node:http2 (h2c): gRPC, gRPC-web and Connect on one port. Deno.serve
// cannot carry gRPC trailers.
import * as http2 from "node:http2";
import type { Socket } from "node:net";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { MAX_FRAME_BYTES } from "../../src/seam/limits.ts";

export interface Http2Server {
  readonly url: string;
  close(): Promise<void>;
}

export function listenConnect(
  routes: (router: ConnectRouter) => void,
  host: string,
  port: number,
): Promise<Http2Server> {
  const handler = connectNodeAdapter({
    readMaxBytes: MAX_FRAME_BYTES,
    writeMaxBytes: MAX_FRAME_BYTES,
    routes,
  });
  const server = http2.createServer(handler);
  // Closing drops connections instead of a graceful GOAWAY: Deno 2.9's HTTP/2 client
  // crashes (SIGSEGV) on a GOAWAY about half the time, while a reset is handled fine
  // (docs/seams.md). Clients see the connection end and fail their streams.
  const sockets = new Set<Socket>();
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      const addr = server.address() as { port: number };
      resolve({
        url: `http://${host.includes(":") ? `[${host}]` : host}:${addr.port}`,
        close: () =>
          new Promise<void>((r) => {
            for (const s of sockets) s.destroy();
            server.close(() => r());
          }),
      });
    });
  });
}
