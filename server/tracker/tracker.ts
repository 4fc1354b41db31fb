// The tracker process: the core (registrations, leases, admissions, routes) over SQLite,
// probing with the native engine's reference through a seam dialer, served as a Connect
// service over HTTP/2.
import type { NativeBackend } from "../engine/native/build.ts";
import { sha256File } from "../model/hash.ts";
import { Dialer } from "../seam/dialer.ts";
import { listenConnect } from "../http/http2.ts";
import { log } from "../log/log.ts";
import { probeNode } from "./admission.ts";
import { probeReference } from "./reference.ts";
import { readHeader } from "../model/facts.ts";
import { buildManifest } from "../../src/gguf/manifest.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import type { SeamCompressionPolicy } from "../../src/tracker/route-compression.ts";
import { TrackerCore, type TrackerEvent } from "../../src/tracker/tracker-core.ts";
import { TrackerStore } from "./store.ts";
import { trackerRoutes } from "./service.ts";

export interface TrackerOptions {
  readonly modelPath: string;
  readonly backend: NativeBackend;
  readonly dbPath: string;
  /** nodes present it to register and heartbeat */
  readonly nodeToken: string;
  readonly leaseMs: number;
  readonly host: string;
  readonly port: number;
  /** to probe nodes reachable only through a relay */
  readonly relay?: { url: string; token: string };
  /** how routes' seams carry hidden states (default none: f32); auto: q8 where a hop goes through the relay */
  readonly seamCompression?: SeamCompressionPolicy;
}

function logEvent(e: TrackerEvent): void {
  if (e.kind === "registered") {
    log.info("node registered", {
      node: e.rec.node,
      layers: `${e.rec.start}:${e.rec.end}`,
      urls: e.rec.urls,
    });
  } else if (e.kind === "admission") {
    log[e.admission === "admitted" ? "info" : "warn"]("admission", { node: e.node, verdict: e.admission });
  } else {
    log.info("node left", { node: e.node });
  }
}

export async function startTracker(o: TrackerOptions) {
  const store = new TrackerStore(o.dbPath);
  const [artifact, reference, header] = await Promise.all([
    sha256File(o.modelPath),
    probeReference(o.modelPath, o.backend),
    readHeader(o.modelPath),
  ]);
  const manifest = buildManifest(header, (await Deno.stat(o.modelPath)).size, artifact);
  const dialer = await Dialer.connect(o.relay);
  const core = await TrackerCore.open({
    storage: store,
    model: { artifact, nLayer: reference.nLayer, manifest, nEmbdKv: kvShape(header).nEmbdKv },
    leaseMs: o.leaseMs,
    probe: (target, key) => probeNode(dialer.dial, key, reference, target),
    seamCompression: o.seamCompression,
    onEvent: logEvent,
  });
  const server = await listenConnect(trackerRoutes(core, o.nodeToken), o.host, o.port);
  log.info("tracker ready", { url: server.url, artifact, known_nodes: core.knownNodes });
  return {
    url: server.url,
    publicKey: core.routePublicKey,
    close: async () => {
      dialer.close();
      await server.close();
      store.close();
    },
  };
}
