// A shard node process: one layer range on the native engine, seams served over HTTP/2,
// through a relay, or both.
import { createHash } from "node:crypto";
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { ShardNode } from "../../src/node/shard-node.ts";
import { relayHopUrl } from "../../src/route/hop-url.ts";
import type { FrameTap } from "../../src/seam/link.ts";
import { ensureNativeLibrary, type NativeBackend } from "../engine/native/build.ts";
import { NativeEngine } from "../engine/native/native-engine.ts";
import { ensureWasmEngine, WASM64_MEMORY_CAP } from "../engine/wasm/build.ts";
import { loadWasmEngine } from "../engine/wasm/load.ts";
import { artifactSha256 } from "../model/hash.ts";
import type { ArtifactManifest } from "../../src/artifact/pieces.ts";
import { bytesToHex, hexToBytes } from "../../src/bytes/hex.ts";
import { artifactManifest } from "../artifacts/manifest.ts";
import { artifactRoutes } from "../artifacts/routes.ts";
import { type HttpServer, serveHttp } from "../http/serve-http.ts";
import { Dialer } from "../seam/dialer.ts";
import { type SeamServer, serveSeams } from "../seam/grpc.ts";
import { log } from "../log/log.ts";
import { scaledOutputs } from "./fault.ts";
import { WASM32_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";
import { joinTracker, type Membership } from "../tracker/client.ts";
import { measureDecode } from "../../src/node/measure.ts";

export interface NodeConfig {
  readonly name: string;
  readonly modelPath: string;
  readonly range: LayerRange;
  readonly backend: NativeBackend;
  /** native (FFI) or wasm (the WebAssembly build under Deno: CPU, one thread, on the event loop for now) */
  readonly engine?: "native" | "wasm";
  /** with the wasm engine: WebGPU when the adapter can run it */
  readonly webgpu?: boolean;
  /** with the wasm engine: the wasm64 build */
  readonly memory64?: boolean;
  readonly threads: number;
  readonly kvCells: number;
  /** batch-invariant decoding (default true): see ShardSpec.batchInvariant */
  readonly batchInvariant?: boolean;
  readonly maxSessions: number;
  readonly batchTokens: number;
  readonly leaseMs: number;
  /** verifies route tickets; with a tracker, the tracker's key is used */
  readonly routeKey?: CryptoKey;
  /** register with this tracker and renew the lease by heartbeat */
  readonly tracker?: { url: string; token: string };
  /** test aid: serve deliberately wrong outputs */
  readonly fault?: "scale";
  /** host:port to serve seams on; undefined = reachable through the relay only */
  readonly listen?: { host: string; port: number };
  /** the URL others reach the seam server at, when not the listen address (behind a forwarder) */
  readonly publicUrl?: string;
  readonly relay?: { url: string; token: string };
  readonly tap?: FrameTap;
  /** the artifact, when the file is a shard's sparse download (its bytes hash to something else) */
  readonly manifest?: ArtifactManifest;
  /** serve this range's bytes of the artifact here (HTTP Range) for others to download */
  readonly serveArtifact?: { host: string; port: number };
}

export interface RunningNode {
  readonly node: ShardNode;
  /** this node's measured decode rate for its range, one session */
  readonly tokensPerS: number;
  /** hop URLs this node is reachable at */
  readonly urls: string[];
  /** where it serves its range's bytes ("" = it does not) */
  readonly artifactUrl: string;
  close(): Promise<void>;
}

export async function startNode(c: NodeConfig): Promise<RunningNode> {
  if (!c.routeKey && !c.tracker) throw new Error("a node needs a route key or a tracker that hands one over");
  const spec = {
    modelPath: c.modelPath,
    range: c.range,
    kvCells: c.kvCells,
    maxSequences: c.maxSessions,
    batchTokens: c.batchTokens,
    threads: c.threads,
    batchInvariant: c.batchInvariant ?? true,
  };
  const wasm = c.engine === "wasm";
  const [artifact, loaded] = await Promise.all([
    c.manifest ? hexToBytes(c.manifest.artifact) : artifactSha256(c.modelPath),
    wasm
      ? loadWasmEngine(spec, { webgpu: c.webgpu, memory64: c.memory64 })
      : NativeEngine.load(spec, c.backend),
  ]);
  // the build (its cache key is in the path) and backend decide the numerics
  const build = wasm
    ? await ensureWasmEngine(loaded.backend === "wasm-webgpu" ? "webgpu" : "cpu", { memory64: c.memory64 })
    : await ensureNativeLibrary(c.backend);
  const label = wasm ? loaded.backend : `native-${c.backend}`;
  const tokensPerS = await measureDecode(loaded);
  const memory = await loaded.memory();
  const engine = c.fault === "scale" ? scaledOutputs(loaded) : loaded;
  const recipe = createHash("sha256").update(`${build}|${label}`).digest();
  const dialer = await Dialer.connect(c.relay, c.tap);
  const relayPeer = dialer.relay?.peer;
  let keyFromTracker!: (k: CryptoKey) => void;
  const trackerKey = new Promise<CryptoKey>((r) => (keyFromTracker = r));
  const node = new ShardNode(engine, {
    nodeId: c.name,
    artifactSha256: artifact,
    recipe: new Uint8Array(recipe),
    engineLabel: label,
    routeKey: c.routeKey ?? trackerKey,
    dial: dialer.dial,
    // the WASM engine computes on this event loop (not an FFI worker): see yieldBeforeBatch
    limits: {
      maxBatchTokens: c.batchTokens,
      maxQueuedPerSession: 64,
      // what the engine holds (llama.cpp pads each session's stream), and each session's share
      kvCells: memory.kvCells,
      kvCellsPerSession: memory.kvCellsPerSequence,
      yieldBeforeBatch: wasm,
    },
    leaseMs: c.leaseMs,
  });
  const urls: string[] = [];
  let server: SeamServer | undefined;
  if (c.listen) {
    server = await serveSeams(node.serve, () => node.info(), c.listen.host, c.listen.port);
    urls.push(c.publicUrl ?? server.url);
  }
  if (relayPeer) {
    relayPeer.listen(node.serve);
    urls.push(relayHopUrl(c.relay!.url, relayPeer.name));
  }
  let artifactServer: HttpServer | undefined;
  if (c.serveArtifact) {
    const manifest = c.manifest ?? await artifactManifest(c.modelPath);
    const served = { path: c.modelPath, manifest, layers: c.range };
    artifactServer = serveHttp(artifactRoutes([served]).fetch, c.serveArtifact.host, c.serveArtifact.port);
  }
  const artifactUrl = artifactServer ? `${artifactServer.url}/artifacts/${bytesToHex(artifact)}` : "";
  let membership: Membership | undefined;
  if (c.tracker) {
    membership = await joinTracker(c.tracker.url, c.tracker.token, c.name, urls, {
      artifactSha256: node.options.artifactSha256,
      range: { start: c.range.start, end: c.range.end },
      engine: label,
      kvCells: c.kvCells,
      sessionCells: memory.kvCellsPerSequence,
      maxSessions: c.maxSessions,
      decodeTokensPerS: tokensPerS,
      memoryCapBytes: BigInt(wasm ? (c.memory64 ? WASM64_MEMORY_CAP : WASM32_MEMORY_CAP) : 0),
      artifactUrl,
    }, () => node);
    keyFromTracker(membership.routeKey);
  }
  log.info("node ready", { name: c.name, range: `${c.range.start}:${c.range.end}`, urls, tokensPerS });
  return {
    node,
    urls,
    artifactUrl,
    tokensPerS,
    close: async () => {
      membership?.stop();
      await node.close();
      dialer.close();
      await server?.close();
      await artifactServer?.close();
      await engine.close();
    },
  };
}
