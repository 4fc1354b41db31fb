// A shard node process (Deno): the one node runtime (src/node/runtime.ts) with this host's
// adapters (server/host/): the native or WASM-in-a-worker engine, gRPC seams and/or a relay
// channel, the tracker over Connect; and an artifact server for peers' downloads.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import type { ShardNode } from "../../src/node/shard-node.ts";
import { nodeEngineSpec, startShardNode } from "../../src/node/runtime.ts";
import type { FrameTap } from "../../src/seam/link.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { artifactSha256 } from "../model/hash.ts";
import type { ArtifactManifest } from "../../src/artifact/pieces.ts";
import { bytesToHex, hexToBytes } from "../../src/bytes/hex.ts";
import { artifactManifest } from "../artifacts/manifest.ts";
import { artifactRoutes } from "../artifacts/routes.ts";
import { type HttpServer, serveHttp } from "../http/serve-http.ts";
import type { Dialer } from "../../node-apis/seam/dialer.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { log } from "../log/log.ts";
import { scaledOutputs } from "./fault.ts";
import { checkEngineMemory, engineMemoryCap, loadEngine } from "../host/engine.ts";
import { connectDialer } from "../host/dialer.ts";
import { seamListeners } from "../host/listeners.ts";
import { nodeCertificate, nodeTracker } from "../host/tracker.ts";

export interface NodeConfig {
  readonly name: string;
  readonly modelPath: string;
  readonly range: LayerRange;
  readonly backend: NativeBackend;
  /** native (FFI) or wasm (the WebAssembly build under Deno, in a worker of its own) */
  readonly engine?: "native" | "wasm";
  /** with the wasm engine: WebGPU when the adapter can run it */
  readonly webgpu?: boolean;
  /** with the wasm engine: the wasm64 build */
  readonly memory64?: boolean;
  readonly threads: number;
  readonly kvCells: number;
  /** most tokens one session may hold here (default: the pool's; see NodeSetup.ctxSize) */
  readonly ctxSize?: number;
  /** batch-invariant decoding (default true): see ShardSpec.batchInvariant */
  readonly batchInvariant?: boolean;
  /** native engines: the core kept from idling this long after each decode (0: never) */
  readonly keepAwakeMs?: number;
  readonly maxSessions: number;
  readonly batchTokens: number;
  readonly leaseMs: number;
  /** KV cells kept as prefix entries (0: none; default: half the pool) */
  readonly prefixCells?: number;
  /** a route's decoding sessions take turns in cohorts (default: as the node's cost timed at load says; see NodeSetup) */
  readonly cohorts?: boolean;
  /** a session opened that has taken no step this long is released (default 120 s) */
  readonly unusedSessionMs?: number;
  /** verifies route tickets; with a tracker, the tracker's key is used */
  readonly routeKey?: CryptoKey;
  /** register with this tracker and renew the lease by heartbeat */
  readonly tracker?: { url: string; token: string };
  /** test aid: serve deliberately wrong outputs */
  readonly fault?: "scale" | "scale-later";
  /** host:port to serve seams on; undefined = reachable through the relay only */
  readonly listen?: { host: string; port: number };
  /** the URL others reach the seam server at, when not the listen address (behind a forwarder) */
  readonly publicUrl?: string;
  /** serve seams (and the artifact) over TLS, with a certificate the tracker signs */
  readonly tls?: boolean;
  readonly relay?: { url: string; token: string };
  readonly tap?: FrameTap;
  /** the artifact, when the file is a shard's sparse download (its bytes hash to something else) */
  readonly manifest?: ArtifactManifest;
  /** serve this range's bytes of the artifact here (HTTP Range) for others to download */
  readonly serveArtifact?: { host: string; port: number };
  /** what the served bytes are advertised at (default: the server's own address) */
  readonly artifactPublicUrl?: string;
  /**
   * refuse a range whose weights + KV + compute pass this many bytes; default: the memory
   * available now (native), what the module can address (wasm: 4 GiB, wasm64 16 GiB)
   */
  readonly memoryCapBytes?: number;
  /** the tracker places this node elsewhere now (`--layers auto`) */
  readonly onPlace?: (range: { start: number; end: number }) => void;
  /** the connections of the node this one replaces (a move), kept open when this one closes */
  readonly dialer?: Dialer;
}

export interface RunningNode {
  readonly node: ShardNode;
  /** its gRPC clients and relay connection */
  readonly dialer: Dialer;
  /** this node's measured decode rate for its range, one session */
  readonly tokensPerS: number;
  /** hop URLs this node is reachable at */
  readonly urls: string[];
  /** where it serves its range's bytes ("" = it does not) */
  readonly artifactUrl: string;
  /** the memory cap it runs with and advertises */
  readonly memoryCapBytes: number;
  /**
   * Hands its prefix entries to another node of its range that the tracker knows (before it goes:
   * a move, a shutdown): the entries that node took, 0 when there is none.
   */
  handOver(withinMs?: number): Promise<number>;
  close(): Promise<void>;
}

export async function startNode(c: NodeConfig): Promise<RunningNode> {
  const memoryCapBytes = engineMemoryCap(c, c.memoryCapBytes);
  const spec = nodeEngineSpec({ ...c, batchInvariant: c.batchInvariant ?? true, memoryCapBytes });
  // refused from the header before the file is hashed or read (the engines check again)
  await checkEngineMemory(spec, c);
  const [artifact, loaded] = await Promise.all([
    c.manifest ? hexToBytes(c.manifest.artifact) : artifactSha256(c.modelPath),
    loadEngine(spec, c),
  ]);
  // scale-later: honest until the tracker admits the node, wrong from then on
  let admitted = false;
  const engine = c.fault ? scaledOutputs(loaded, () => c.fault === "scale" || admitted) : loaded;
  // a node moving to another range keeps its relay connection: the old range's sessions ride
  // it until they end, the new range's start on it (a second connection under the same name
  // would replace the first)
  const dialer = c.dialer ?? await connectDialer(c.relay, c.tap);
  const cert = c.tls ? await nodeCertificate(c) : undefined;
  const listeners = seamListeners(dialer, { listen: c.listen, publicUrl: c.publicUrl, cert });
  let artifactServer: HttpServer | undefined;
  if (c.serveArtifact) {
    const manifest = c.manifest ?? await artifactManifest(c.modelPath);
    const served = { path: c.modelPath, manifest, layers: c.range };
    artifactServer = serveHttp(
      artifactRoutes([served]).fetch,
      c.serveArtifact.host,
      c.serveArtifact.port,
      cert,
    );
  }
  const artifactBase = c.artifactPublicUrl?.replace(/\/$/, "") ?? artifactServer?.url;
  const artifactUrl = artifactServer ? `${artifactBase}/artifacts/${bytesToHex(artifact)}` : "";
  const running = await startShardNode({
    name: c.name,
    artifactSha256: artifact,
    kvCells: c.kvCells,
    ctxSize: c.ctxSize,
    maxSessions: c.maxSessions,
    batchTokens: c.batchTokens,
    leaseMs: c.leaseMs,
    unusedSessionMs: c.unusedSessionMs,
    cohorts: c.cohorts,
    prefix: c.prefixCells === undefined
      ? undefined
      : c.prefixCells > 0 && { entries: c.maxSessions, cells: c.prefixCells },
    routeKey: c.routeKey,
    artifactUrl,
  }, {
    engine,
    dial: dialer.dial,
    listeners,
    tracker: c.tracker && nodeTracker(c.tracker, c.name),
    memoryCapBytes,
  }, {
    onAdmission: (a) => void (admitted = a === "admitted"),
    onPlace: c.onPlace,
    onBeatFailed: (e) =>
      log.warn("heartbeat failed", {
        tracker: c.tracker?.url,
        error: e instanceof Error ? e.message : String(e),
      }),
  });
  const { node, urls, tokensPerS, batchCost } = running;
  log.info("node ready", {
    name: c.name,
    range: `${c.range.start}:${c.range.end}`,
    urls,
    tokensPerS,
    memoryCapBytes,
    // a step alone and in a batch, as timed at load, and the cohorts chosen from them
    stepMs: batchCost.oneMs,
    batchStepMs: batchCost.batchMs,
    batchSessions: batchCost.batchSessions,
    cohorts: batchCost.cohorts,
    cohortsBy: batchCost.cohortsBy,
  });
  return {
    node,
    dialer,
    urls,
    artifactUrl,
    tokensPerS,
    memoryCapBytes,
    handOver: async (withinMs = 10_000) => {
      // nothing to hand over: the tracker is not asked for a route
      if (!c.tracker || node.prefixEntries === 0) return 0;
      const until = Date.now() + withinMs;
      const t = trackerClient(c.tracker.url);
      // a route of other nodes ticketed for this work: its hop of this range takes the entries
      const work = `handover/${c.name}/${crypto.randomUUID()}`;
      try {
        const { routes } = await t.client.route(
          { artifactSha256: artifact, sessionId: work, count: 1, otherThan: [c.name] },
          { timeoutMs: withinMs },
        );
        const to = routes[0]?.hops.find((h) =>
          h.range?.start === c.range.start && h.range?.end === c.range.end
        );
        const taken = to ? await node.handOver(to, until) : 0;
        log.info("prefix entries handed over", { name: c.name, to: to?.node, entries: taken });
        return taken;
      } catch (e) {
        log.info("no prefix entries handed over", {
          name: c.name,
          why: e instanceof Error ? e.message : String(e),
        });
        return 0;
      } finally {
        await t.client.done({ sessionId: work }, { timeoutMs: 5000 }).catch(() => {});
        t.close();
      }
    },
    close: async () => {
      await running.close();
      if (!c.dialer) dialer.close();
      await artifactServer?.close();
      await engine.close();
    },
  };
}
