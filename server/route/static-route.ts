// A route given by hand: node URLs in order (ranges asked of each direct node, or given),
// tickets signed with the operator's route key. The tracker replaces this in a network.
import { logRelay } from "../log/log.ts";
import { bytesToHex } from "../../src/bytes/hex.ts";
import type { LayerRange } from "../../src/engine/layer-range.ts";
import {
  type RouteSession,
  RouteSession as Session,
  type SessionOptions,
} from "../../src/route/route-session.ts";
import { parseHopUrl } from "../../src/route/hop-url.ts";
import { pipelineChunkFloor } from "../../src/route/prefill-pipeline.ts";
import { checkCoverage, type HopPlan, signRoute } from "../../src/route/plan.ts";
import { SeamError } from "../../src/seam/errors.ts";
import type { FrameTap } from "../../src/seam/link.ts";
import { Dialer } from "../../node-apis/seam/dialer.ts";

export interface StaticRouteOptions {
  readonly nodes: readonly string[];
  /** ranges per node, needed for nodes reached through a relay (they answer no Info) */
  readonly split?: readonly LayerRange[];
  readonly nLayer: number;
  readonly artifactSha256: Uint8Array;
  /** private route key */
  readonly key: CryptoKey;
  /** this client's relay connection, for relay hops */
  readonly relay?: { readonly url: string; readonly token: string };
  readonly tap?: FrameTap;
}

export class StaticRoute {
  #epoch = 0n;

  private constructor(
    readonly dialer: Dialer,
    readonly hops: HopPlan[],
    private readonly o: StaticRouteOptions,
    /** from the nodes' engines (`prefill-pipeline.ts`); relay hops answer no Info: 0 */
    readonly pipelineChunkFloor: number,
  ) {}

  static async connect(o: StaticRouteOptions): Promise<StaticRoute> {
    const dialer = await Dialer.connect(o.relay, o.tap, logRelay);
    if (o.split && o.split.length !== o.nodes.length) {
      throw new SeamError("malformed", `${o.nodes.length} nodes but ${o.split.length} ranges`);
    }
    const engines: string[] = o.nodes.map(() => "");
    const hops = await Promise.all(o.nodes.map(async (url, i): Promise<HopPlan> => {
      const given = o.split?.[i];
      if (parseHopUrl(url).kind === "relay") {
        if (!given) {
          throw new SeamError("malformed", `${url} is reached through a relay: give its range (--split)`);
        }
        return { url, range: given };
      }
      const info = await dialer.grpc.info(url);
      if (bytesToHex(info.artifactSha256) !== bytesToHex(o.artifactSha256)) {
        throw new SeamError(
          "wrong_shard",
          `${url} serves another model artifact (${bytesToHex(info.artifactSha256).slice(0, 12)}…)`,
        );
      }
      const range = { start: info.range!.start, end: info.range!.end };
      engines[i] = info.engine;
      if (given && (given.start !== range.start || given.end !== range.end)) {
        throw new SeamError(
          "wrong_shard",
          `${url} holds ${range.start}:${range.end}, not ${given.start}:${given.end}`,
        );
      }
      return { url, range };
    }));
    checkCoverage(hops, o.nLayer);
    return new StaticRoute(dialer, hops, o, pipelineChunkFloor(engines));
  }

  /** Opens a Route Session on every hop, with freshly signed tickets. */
  async open(sessionId: string, s: Omit<SessionOptions, "sessionId" | "epoch" | "artifactSha256">, opts: {
    epoch?: bigint;
    ticketTtlMs?: number;
    now?: number;
  } = {}): Promise<RouteSession> {
    const epoch = opts.epoch ?? ++this.#epoch;
    const grant = { sessionId, routeEpoch: epoch, artifactSha256: this.o.artifactSha256 };
    const hops = await signRoute(
      this.o.key,
      this.hops,
      grant,
      opts.ticketTtlMs ?? 600_000,
      "strata-route",
      opts.now,
    );
    return await Session.open(this.dialer.dial, hops, {
      pipelineChunkFloor: this.pipelineChunkFloor,
      ...s,
      sessionId,
      epoch,
      artifactSha256: this.o.artifactSha256,
    });
  }

  close(): void {
    this.dialer.close();
  }
}
