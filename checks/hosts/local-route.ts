// A whole static route on this machine: one process per shard node (and a relay process
// when the last node is to be reached through it), a route key, and the driver's view.
import { formatRange, type LayerRange } from "../../src/engine/layer-range.ts";
import { importPrivateRouteKey, newRouteKeyText, type RouteKeyText } from "../../src/route/keys.ts";
import { peerToken } from "../../src/relay/token.ts";
import type { FrameTap } from "../../src/seam/link.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { artifactSha256 } from "../../server/model/hash.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { StaticRoute } from "../../server/route/static-route.ts";

export type Transport = "direct" | "relay";

export interface LocalRouteOptions {
  readonly modelPath: string;
  readonly split: readonly LayerRange[];
  readonly nLayer: number;
  readonly backend: NativeBackend;
  readonly threads: number;
  /** relay: the last node accepts no connections and is reached through a relay process */
  readonly transport: Transport;
  readonly kvCells?: number;
  readonly maxSessions?: number;
  readonly leaseMs?: number;
  /**
   * true: the nodes take turns in cohorts (`--cohorts`); false: they batch every ready step at
   * once (`--no-cohorts`), for comparison; absent: as each node's batch cost says
   */
  readonly cohorts?: boolean;
  /** extra environment for the node processes */
  readonly env?: Record<string, string>;
  /** extra arguments for every `strata node` */
  readonly nodeArgs?: readonly string[];
  /** per node: "native" (default) or "wasm" */
  readonly engines?: readonly ("native" | "wasm")[];
  /** the route key (a new one when absent) */
  readonly keyText?: RouteKeyText;
  /** sees every frame the driver sends */
  readonly tap?: FrameTap;
}

export interface LocalRoute {
  readonly route: StaticRoute;
  readonly nodes: ServiceProcess[];
  readonly relay?: ServiceProcess;
  readonly keyPath: string;
  /** signs relay peer tokens (relay transport) */
  readonly relaySecret?: string;
  close(): Promise<void>;
}

export async function startLocalRoute(o: LocalRouteOptions): Promise<LocalRoute> {
  const dir = await Deno.makeTempDir({ prefix: "strata-route-" });
  const keyText = o.keyText ?? await newRouteKeyText();
  const keyPath = `${dir}/route-key.json`;
  await Deno.writeTextFile(keyPath, JSON.stringify(keyText));
  const secret = crypto.randomUUID();
  const started: ServiceProcess[] = [];
  const stopAll = async () => {
    await Promise.all(started.map((p) => p.stop()));
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    let relayUrl: string | undefined;
    let relay: ServiceProcess | undefined;
    if (o.transport === "relay") {
      relay = await ServiceProcess.start("relay", [
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--relay-secret",
        secret,
      ]);
      started.push(relay);
      relayUrl = String(relay.ready.url);
    }
    const nodes: ServiceProcess[] = [];
    const urls: string[] = [];
    // one after another: loads do not compete for the cores
    for (const [i, range] of o.split.entries()) {
      const relayOnly = o.transport === "relay" && i === o.split.length - 1;
      const args = [
        "node",
        "--model",
        o.modelPath,
        "--layers",
        formatRange(range),
        "--route-key",
        keyPath,
        "--backend",
        o.backend,
        "--threads",
        String(o.threads),
        "--kv-cells",
        String(o.kvCells ?? 8192),
        "--max-sessions",
        String(o.maxSessions ?? 16),
        "--session-idle-ms",
        String(o.leaseMs ?? 300_000),
      ];
      if (o.cohorts !== undefined) args.push(o.cohorts ? "--cohorts" : "--no-cohorts");
      if (o.nodeArgs) args.push(...o.nodeArgs);
      if (!relayOnly) args.push("--listen", "127.0.0.1:0");
      if (relayUrl) args.push("--relay", relayUrl, "--relay-token", await peerToken(secret, `node${i}`));
      const p = await ServiceProcess.start(`node ${formatRange(range)}`, args, o.env);
      started.push(p);
      nodes.push(p);
      const nodeUrls = p.ready.urls as string[];
      urls.push(relayOnly ? nodeUrls.find((u) => u.startsWith("relay+"))! : nodeUrls[0]);
    }
    const route = await StaticRoute.connect({
      nodes: urls,
      split: o.split,
      nLayer: o.nLayer,
      artifactSha256: await artifactSha256(o.modelPath),
      key: await importPrivateRouteKey(keyText),
      relay: relayUrl ? { url: relayUrl, token: await peerToken(secret, "driver") } : undefined,
      tap: o.tap,
    });
    return {
      route,
      nodes,
      relay,
      keyPath,
      relaySecret: relay ? secret : undefined,
      close: async () => {
        route.close();
        await stopAll();
      },
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}
