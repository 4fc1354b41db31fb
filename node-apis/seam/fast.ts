// The fast seam on sockets: a seam server takes it on its own port beside gRPC (told apart by
// the first bytes), and a dialer tries it first, falling back to gRPC when the node at the
// other end does not answer it.
import { FAST_PREFACE, MuxClient, serveMux } from "../../src/seam/mux.ts";
import { deferredLink } from "../../src/seam/deferred-link.ts";
import type { FrameTap, SeamLink, SeamServe } from "../../src/seam/link.ts";
import type { SideProtocol } from "../http/http2.ts";
import { dialSide, SideDialError } from "../http/dial-side.ts";
import { grpcKind } from "../../src/route/hop-url.ts";

/** The seam server's side protocol: each fast connection's streams go to `serve`. */
export function fastSide(serve: SeamServe, tap?: FrameTap): SideProtocol {
  return {
    preface: FAST_PREFACE,
    take: (duplex, head, tls) => serveMux(duplex, serve, head, tap, tls ? "tls" : "tcp"),
  };
}

/** How long a node that refused the fast seam is left to gRPC before it is asked again. */
const RETRY_FAST_MS = 60_000;

/** Fast-seam connections, one per node, shared by every stream to it. */
export class FastSeams {
  readonly #conns = new Map<string, Promise<MuxClient | undefined>>();
  /** connections that answered: a stream to them starts at once */
  readonly #ready = new Map<string, MuxClient>();
  readonly #refusedAt = new Map<string, number>();

  constructor(private readonly fallback: (baseUrl: string) => SeamLink, private readonly tap?: FrameTap) {}

  /** A stream to the node at baseUrl (http:// or https://host:port): the fast seam if it
   *  answers, else gRPC. */
  dial(baseUrl: string): SeamLink {
    const refused = this.#refusedAt.get(baseUrl);
    if (refused !== undefined && Date.now() - refused < RETRY_FAST_MS) return this.fallback(baseUrl);
    const ready = this.#ready.get(baseUrl);
    if (ready && !ready.closed) return ready.dial();
    let conn = this.#conns.get(baseUrl);
    if (!conn) {
      conn = this.#connect(baseUrl);
      this.#conns.set(baseUrl, conn);
    }
    return deferredLink(conn.then((c) => c ? c.dial() : this.fallback(baseUrl)), grpcKind(baseUrl));
  }

  close(): void {
    for (const c of this.#conns.values()) void c.then((m) => m?.close());
    this.#conns.clear();
    this.#ready.clear();
  }

  async #connect(baseUrl: string): Promise<MuxClient | undefined> {
    let dialed;
    try {
      dialed = await dialSide(baseUrl);
    } catch (e) {
      this.#conns.delete(baseUrl);
      // a TLS node that refused the fast seam (or this certificate) is left to gRPC, which
      // says why in its own words; so does an unreachable one, asked again next time
      if (e instanceof SideDialError && e.reached) this.#refusedAt.set(baseUrl, Date.now());
      return undefined;
    }
    if (!dialed) {
      this.#conns.delete(baseUrl);
      return undefined;
    }
    const { duplex, reached } = dialed;
    const u = new URL(baseUrl);
    try {
      const c = await MuxClient.connect(duplex, {
        tap: this.tap,
        transport: u.protocol === "https:" ? "tls" : "tcp",
      });
      this.#ready.set(baseUrl, c);
      // the next dial after this connection ends connects afresh
      duplex.onClose(() => {
        this.#conns.delete(baseUrl);
        if (this.#ready.get(baseUrl) === c) this.#ready.delete(baseUrl);
      });
      return c;
    } catch {
      this.#conns.delete(baseUrl);
      // a node that took the connection but not the fast seam speaks gRPC only (a node that
      // could not be reached at all is asked again next time)
      if (reached()) this.#refusedAt.set(baseUrl, Date.now());
      return undefined;
    }
  }
}
