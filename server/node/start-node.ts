// A shard node process: one layer range on the native engine, seams served over HTTP/2,
// through a relay, or both.
import { createHash } from "node:crypto";
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { ShardNode } from "../../src/node/shard-node.ts";
import { RelayPeer } from "../../src/relay/peer.ts";
import { relayHopUrl } from "../../src/route/hop-url.ts";
import type { FrameTap } from "../../src/seam/link.ts";
import { ensureNativeLibrary, type NativeBackend } from "../engine/native/build.ts";
import { NativeEngine } from "../engine/native/native-engine.ts";
import { sha256File } from "../model/hash.ts";
import { Dialer } from "../seam/dialer.ts";
import { type SeamServer, serveSeams } from "../seam/grpc.ts";
import { connectRelay } from "../relay/ws-socket.ts";
import { log } from "../util/log.ts";

export interface NodeConfig {
  readonly name: string;
  readonly modelPath: string;
  readonly range: LayerRange;
  readonly backend: NativeBackend;
  readonly threads: number;
  readonly kvCells: number;
  readonly maxSessions: number;
  readonly batchTokens: number;
  readonly leaseMs: number;
  readonly routeKey: CryptoKey;
  /** host:port to serve seams on; undefined = reachable through the relay only */
  readonly listen?: { host: string; port: number };
  readonly relay?: { url: string; token: string };
  readonly tap?: FrameTap;
}

export interface RunningNode {
  readonly node: ShardNode;
  /** hop URLs this node is reachable at */
  readonly urls: string[];
  close(): Promise<void>;
}

export async function startNode(c: NodeConfig): Promise<RunningNode> {
  const lib = await ensureNativeLibrary(c.backend);
  const [artifact, engine] = await Promise.all([
    sha256File(c.modelPath),
    NativeEngine.load({
      modelPath: c.modelPath,
      range: c.range,
      kvCells: c.kvCells,
      maxSequences: c.maxSessions,
      batchTokens: c.batchTokens,
      threads: c.threads,
    }, c.backend),
  ]);
  // the build (its cache key is in the path) and backend decide the numerics
  const recipe = createHash("sha256").update(`${lib}|${c.backend}`).digest();
  const relays = new Map<string, Promise<RelayPeer>>();
  let relayPeer: RelayPeer | undefined;
  if (c.relay) {
    const socket = await connectRelay(c.relay.url, c.relay.token);
    relayPeer = new RelayPeer(socket, c.name, c.tap);
    relays.set(c.relay.url.replace(/\/$/, ""), Promise.resolve(relayPeer));
  }
  const dialer = new Dialer(relays, c.tap);
  const node = new ShardNode(engine, {
    nodeId: c.name,
    artifactSha256: Uint8Array.from(artifact.match(/../g)!.map((h) => parseInt(h, 16))),
    recipe: new Uint8Array(recipe),
    engineLabel: `native-${c.backend}`,
    routeKey: c.routeKey,
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
    urls.push(relayHopUrl(c.relay!.url, c.name));
  }
  log.info("node ready", { name: c.name, range: `${c.range.start}:${c.range.end}`, urls });
  return {
    node,
    urls,
    close: async () => {
      await node.close();
      relayPeer?.close();
      dialer.close();
      await server?.close();
      await engine.close();
    },
  };
}
