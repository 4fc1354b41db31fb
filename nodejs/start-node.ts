// A shard node under Node.js: the one node runtime (src/node/runtime.ts) with Node's adapters
// (nodejs/host/): the WASM engine on this thread, seams over gRPC and/or a relay channel, the
// tracker over Connect. The HTTP/2, gRPC and WebSocket pieces are the ones Deno nodes use
// (node-apis/): they speak node: APIs, which both runtimes have.
import { sha256Hex } from "../src/gguf/manifest.ts";
import { hexToBytes } from "../src/bytes/hex.ts";
import {
  type NodeEngineSettings,
  nodeEngineSpec,
  type RunningShard,
  startShardNode,
} from "../src/node/runtime.ts";
import { engineMemoryCap, loadEngine } from "./host/engine.ts";
import { connectDialer } from "./host/dialer.ts";
import { seamListeners } from "./host/listeners.ts";
import { nodeTracker } from "./host/tracker.ts";

export interface NodeJsNodeConfig extends NodeEngineSettings {
  readonly name: string;
  /** a WASM build folder (cpu flavor) */
  readonly wasmDir: string;
  readonly leaseMs: number;
  readonly listen?: { host: string; port: number };
  readonly relay?: { url: string; token: string };
  readonly routeKey?: CryptoKey;
  readonly tracker?: { url: string; token: string };
}

/** close() stops serving, leaves the tracker's lease to lapse, and frees the engine. */
export async function startNodeJsNode(c: NodeJsNodeConfig): Promise<RunningShard> {
  const memoryCapBytes = engineMemoryCap(c.memoryCapBytes);
  const { engine, model } = await loadEngine(nodeEngineSpec({ ...c, memoryCapBytes }), c.wasmDir);
  const dialer = await connectDialer(c.relay);
  const listeners = seamListeners(dialer, { listen: c.listen });
  const running = await startShardNode({
    name: c.name,
    artifactSha256: hexToBytes(await sha256Hex(model)),
    kvCells: c.kvCells,
    maxSessions: c.maxSessions,
    batchTokens: c.batchTokens,
    leaseMs: c.leaseMs,
    routeKey: c.routeKey,
  }, {
    engine,
    dial: dialer.dial,
    listeners,
    tracker: c.tracker && nodeTracker(c.tracker, c.name),
    memoryCapBytes,
  });
  return {
    ...running,
    close: async (o) => {
      await running.close(o);
      dialer.close();
      await engine.close();
    },
  };
}
