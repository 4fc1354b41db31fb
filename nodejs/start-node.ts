// A shard node under Node.js: the one node runtime (src/node/runtime.ts) with Node's adapters:
// the WASM engine through the one loader (on this thread: Node has no web Worker to give it),
// seams over gRPC and/or a relay channel, the tracker over Connect. The HTTP/2, gRPC and
// WebSocket pieces are the ones Deno nodes use: they speak node: APIs, which both runtimes have.
import { readFileSync } from "node:fs";
import { loadWasmEngineFrom } from "../src/engine/wasm/load-engine.ts";
import { WASM32_MEMORY_CAP } from "../src/engine/wasm/wasm-engine.ts";
import { sha256Hex } from "../src/gguf/manifest.ts";
import { hexToBytes } from "../src/bytes/hex.ts";
import {
  type NodeEngineSettings,
  nodeEngineSpec,
  type RunningShard,
  type SeamListener,
  startShardNode,
} from "../src/node/runtime.ts";
import { relayListener } from "../src/relay/relay-seams.ts";
import { Dialer } from "../server/seam/dialer.ts";
import { grpcListener } from "../server/seam/grpc.ts";
import { trackerPort } from "../server/tracker/client.ts";
import { folderWasmFiles } from "../server/engine/wasm/folder-files.ts";

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
  // wasm32: never more than the module addresses (the engine refuses a range past it)
  const memoryCapBytes = Math.min(c.memoryCapBytes || WASM32_MEMORY_CAP, WASM32_MEMORY_CAP);
  const model = new Uint8Array(readFileSync(c.modelPath));
  const { engine } = await loadWasmEngineFrom(folderWasmFiles(c.wasmDir), {
    spec: nodeEngineSpec({ ...c, memoryCapBytes }),
    model,
  });
  const dialer = await Dialer.connect(c.relay);
  const listeners: SeamListener[] = [];
  if (c.listen) listeners.push(grpcListener(c.listen));
  if (dialer.relay) listeners.push(relayListener(dialer.relay.peer, dialer.relay.url));
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
    tracker: c.tracker && trackerPort(c.tracker.url, c.tracker.token, c.name),
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
