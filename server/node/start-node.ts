// A shard node process: one layer range on the native engine, seams served over HTTP/2,
// through a relay, or both.
import { createHash } from "node:crypto";
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { ShardNode } from "../../src/node/shard-node.ts";
import { relayHopUrl } from "../../src/route/hop-url.ts";
import type { FrameTap } from "../../src/seam/link.ts";
import { ensureNativeLibrary, type NativeBackend } from "../engine/native/build.ts";
import { NativeEngine } from "../engine/native/native-engine.ts";
import { ensureWasmEngine } from "../engine/wasm/build.ts";
import { loadWasmEngine } from "../engine/wasm/load.ts";
import { artifactSha256 } from "../model/hash.ts";
import { Dialer } from "../seam/dialer.ts";
import { type SeamServer, serveSeams } from "../seam/grpc.ts";
import { log } from "../util/log.ts";
import { scaledOutputs } from "./fault.ts";
import { WASM32_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";
import { joinTracker, type Membership } from "./tracker-client.ts";
import type { RangeEngine } from "../../src/engine/range-engine.ts";

export interface NodeConfig {
  readonly name: string;
  readonly modelPath: string;
  readonly range: LayerRange;
  readonly backend: NativeBackend;
  /** native (FFI) or wasm (the WebAssembly build under Deno: CPU, one thread, on the event loop for now) */
  readonly engine?: "native" | "wasm";
  /** with the wasm engine: WebGPU when the adapter can run it */
  readonly webgpu?: boolean;
  readonly threads: number;
  readonly kvCells: number;
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
  readonly relay?: { url: string; token: string };
  readonly tap?: FrameTap;
}

export interface RunningNode {
  readonly node: ShardNode;
  /** this node's measured decode rate for its range, one session */
  readonly tokensPerS: number;
  /** hop URLs this node is reachable at */
  readonly urls: string[];
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
  };
  const wasm = c.engine === "wasm";
  const [artifact, loaded] = await Promise.all([
    artifactSha256(c.modelPath),
    wasm ? loadWasmEngine(spec, { webgpu: c.webgpu }) : NativeEngine.load(spec, c.backend),
  ]);
  // the build (its cache key is in the path) and backend decide the numerics
  const build = wasm
    ? await ensureWasmEngine(loaded.backend === "wasm-webgpu" ? "webgpu" : "cpu")
    : await ensureNativeLibrary(c.backend);
  const label = wasm ? loaded.backend : `native-${c.backend}`;
  const tokensPerS = await measureDecode(loaded);
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
    limits: { maxBatchTokens: c.batchTokens, maxQueuedPerSession: 64, kvCells: c.kvCells },
    leaseMs: c.leaseMs,
  });
  const urls: string[] = [];
  let server: SeamServer | undefined;
  if (c.listen) {
    server = await serveSeams(node.serve, () => node.info(), c.listen.host, c.listen.port);
    urls.push(server.url);
  }
  if (relayPeer) {
    relayPeer.listen(node.serve);
    urls.push(relayHopUrl(c.relay!.url, relayPeer.name));
  }
  let membership: Membership | undefined;
  if (c.tracker) {
    membership = await joinTracker(c.tracker.url, c.tracker.token, c.name, urls, {
      artifactSha256: node.options.artifactSha256,
      range: { start: c.range.start, end: c.range.end },
      engine: label,
      kvCells: c.kvCells,
      maxSessions: c.maxSessions,
      decodeTokensPerS: tokensPerS,
      memoryCapBytes: BigInt(wasm ? WASM32_MEMORY_CAP : 0),
    }, () => node);
    keyFromTracker(membership.routeKey);
  }
  log.info("node ready", { name: c.name, range: `${c.range.start}:${c.range.end}`, urls, tokensPerS });
  return {
    node,
    urls,
    tokensPerS,
    close: async () => {
      membership?.stop();
      await node.close();
      dialer.close();
      await server?.close();
      await engine.close();
    },
  };
}

/** Tokens a second one session gets through this range: 16 decode steps on a scratch sequence. */
async function measureDecode(engine: RangeEngine, steps = 16): Promise<number> {
  const seq = engine.openSequence();
  try {
    const one = Int32Array.of(seq);
    const t0 = performance.now();
    for (let i = 0; i < steps; i++) {
      const input = engine.input === "tokens"
        ? { tokens: Int32Array.of(1 + i) }
        : { hidden: Float32Array.from({ length: engine.facts.nEmbd }, (_, k) => Math.sin(k + i)) };
      await engine.decode({ ...input, seq: one, pos: Int32Array.of(i), outputs: Uint8Array.of(1) });
    }
    return steps / ((performance.now() - t0) / 1000);
  } finally {
    await engine.releaseSequence(seq);
  }
}
