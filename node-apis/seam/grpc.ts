// Seams over HTTP/2: the SeamService served with connect-node (gRPC, gRPC-web and Connect
// on one port) and a gRPC client link per Route Session.
import { toBinary } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError, type ConnectRouter, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import {
  type NodeInfo,
  type SeamFrame,
  SeamFrameSchema,
  SeamService,
} from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { MAX_FRAME_BYTES } from "../../src/seam/limits.ts";
import type { FrameTap, SeamLink, SeamServe } from "../../src/seam/link.ts";
import { AsyncQueue } from "../../src/seam/async-queue.ts";
import { grpcKind } from "../../src/route/hop-url.ts";
import type { SeamListener } from "../../src/node/runtime.ts";
import { type Http2Server, listenConnect } from "../http/http2.ts";
import { fastSide } from "./fast.ts";
import { nodeTlsOptions } from "../tls/trust.ts";
import type { CertPair } from "../tls/certs.ts";

export type SeamServer = Http2Server;

/** The SeamService on a Connect router: each stream handed to `serve` (`tls`: served over TLS). */
export function seamRoutes(serve: SeamServe, info: () => Promise<NodeInfo>, tls = false) {
  return (router: ConnectRouter) =>
    router.service(SeamService, {
      async *stream(frames) {
        const out = new AsyncQueue<SeamFrame>();
        const done = serve(frames, (f) => void out.push(f), tls ? "grpcs" : "grpc").finally(() => out.end());
        yield* out;
        await done;
      },
      info: () => info(),
    });
}

/**
 * Serves seam streams and node info on host:port (port 0 picks a free one): gRPC, gRPC-web and
 * Connect, and the fast seam on the same port unless `fast` is false; over TLS with `tls`.
 */
export function serveSeams(
  serve: SeamServe,
  info: () => Promise<NodeInfo>,
  host: string,
  port: number,
  fast = seamTransport() === "tcp",
  tls?: CertPair,
): Promise<SeamServer> {
  return listenConnect(
    seamRoutes(serve, info, tls !== undefined),
    host,
    port,
    fast ? fastSide(serve) : undefined,
    tls,
  );
}

/**
 * The transport between direct hops: "tcp" (the fast seam, gRPC where a node does not speak
 * it) unless STRATA_SEAM_TRANSPORT=grpc says otherwise (for comparisons).
 */
export function seamTransport(): "tcp" | "grpc" {
  const t = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env
    .STRATA_SEAM_TRANSPORT;
  if (t === undefined || t === "" || t === "tcp") return "tcp";
  if (t === "grpc") return "grpc";
  throw new Error(`STRATA_SEAM_TRANSPORT=${t}: say tcp or grpc`);
}

/** A node runtime's listener for direct seams: reachable at publicUrl, or the address it got;
 *  over TLS with the certificate `tls` gives when it starts listening. */
export function grpcListener(
  at: { host: string; port: number },
  publicUrl?: string,
  tls?: () => Promise<CertPair>,
): SeamListener {
  let server: SeamServer | undefined;
  return {
    listen: async (serve, info) => {
      server = await serveSeams(serve, info, at.host, at.port, undefined, await tls?.());
      return [publicUrl ?? server.url];
    },
    close: async () => await server?.close(),
  };
}

/** gRPC clients share one HTTP/2 connection per node. */
export class GrpcSeams {
  readonly #clients = new Map<string, Client<typeof SeamService>>();
  readonly #sessions: Http2SessionManager[] = [];
  /** the streams open to each node, by their abort controllers */
  readonly #open = new Map<string, Set<AbortController>>();

  constructor(private readonly tap?: FrameTap) {}

  client(baseUrl: string): Client<typeof SeamService> {
    let c = this.#clients.get(baseUrl);
    if (!c) {
      const sessionManager = new Http2SessionManager(baseUrl, {
        pingIntervalMs: 10_000,
        pingTimeoutMs: 10_000,
      }, nodeTlsOptions());
      this.#sessions.push(sessionManager);
      const transport = createGrpcTransport({
        baseUrl,
        readMaxBytes: MAX_FRAME_BYTES,
        writeMaxBytes: MAX_FRAME_BYTES,
        sessionManager,
      });
      c = createClient(SeamService, transport);
      this.#clients.set(baseUrl, c);
    }
    return c;
  }

  dial(baseUrl: string): SeamLink {
    const requests = new AsyncQueue<SeamFrame>();
    const abort = new AbortController();
    const stream = this.client(baseUrl).stream(requests, { signal: abort.signal });
    const tap = this.tap;
    const open = this.#open.get(baseUrl) ?? new Set<AbortController>();
    this.#open.set(baseUrl, open);
    open.add(abort);
    const lost = (e: unknown) => this.#lost(baseUrl, abort, e);
    // a stream that fails on its own (not aborted here, not refused for its size) lost the
    // connection all streams to that node share: fail them all now, not when each notices
    async function* replies() {
      try {
        yield* stream;
      } catch (e) {
        if (!abort.signal.aborted && ConnectError.from(e).code !== Code.ResourceExhausted) lost(e);
        throw e;
      } finally {
        open.delete(abort);
      }
    }
    return {
      transport: grpcKind(baseUrl),
      send(frame) {
        tap?.(toBinary(SeamFrameSchema, frame), frame);
        return requests.push(frame);
      },
      replies: replies(),
      close: () => requests.end(),
      abort: (reason) => {
        requests.end();
        abort.abort(new Error(reason));
      },
    };
  }

  /** The connection to baseUrl failed under one stream: every other stream to it ends too. */
  #lost(baseUrl: string, failed: AbortController, e: unknown): void {
    const why = `the connection to ${baseUrl} failed: ${e instanceof Error ? e.message : e}`;
    for (const a of this.#open.get(baseUrl) ?? []) if (a !== failed) a.abort(new Error(why));
    // the next dial connects afresh
    this.#clients.delete(baseUrl);
  }

  /** Closes every HTTP/2 connection this client opened (before the peers go away). */
  close(): void {
    for (const m of this.#sessions.splice(0)) m.abort();
    this.#clients.clear();
  }

  async info(baseUrl: string, timeoutMs = 10_000): Promise<NodeInfo> {
    return await this.client(baseUrl).info({}, { timeoutMs });
  }
}
