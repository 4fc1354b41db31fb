// The tracker process: the core (registrations, leases, admissions, routes) over SQLite,
// probing nodes through a seam dialer against the model's signed reference file (it reads
// the model's header, never a weight), served as a Connect service over HTTP/2.
import { Dialer } from "../../node-apis/seam/dialer.ts";
import { listenConnect } from "../../node-apis/http/http2.ts";
import { directCallsSide } from "./direct-calls.ts";
import { log, logRelay } from "../log/log.ts";
import { probeNode } from "./admission.ts";
import { spotCheck, SpotSink } from "./spot-check.ts";
import { seamRoutes } from "../../node-apis/seam/grpc.ts";
import { create } from "@bufbuild/protobuf";
import { NodeInfoSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { openReference, ReferenceError } from "../../src/tracker/admission/reference.ts";
import { findReference, referenceBeside } from "../model/reference-file.ts";
import type { ModelHeader } from "../artifacts/model-header.ts";
import { readAtMost } from "../../src/bytes/read-at-most.ts";
import { trustedFetch } from "../../node-apis/tls/trust.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { headerGraphShape } from "../../src/gguf/graph-shape.ts";
import type { SeamCompressionPolicy } from "../../src/tracker/routes/route-compression.ts";
import { TrackerCore, type TrackerEvent } from "../../src/tracker/core/tracker-core.ts";
import { TrackerStore } from "./store.ts";
import { PgTrackerStore } from "./pg-store.ts";
import { trackerRoutes } from "./service.ts";
import { BlockEpochs } from "../../src/tracker/routes/epochs.ts";
import { ROUTE_KEY_META } from "../../src/tracker/routes/route-key.ts";
import { newRouteKeyText } from "../../src/route/keys.ts";
import { syncClaimSigner } from "./claim-signer.ts";
import { certifier } from "./certify.ts";
import { certHosts, certifiedPair, type CertPair, openNetworkCa } from "../../node-apis/tls/certs.ts";
import { trustNetworkCa } from "../../node-apis/tls/trust.ts";

export interface TrackerOptions {
  /** the model's header and manifest (from a local GGUF or an artifact origin) */
  readonly model: ModelHeader;
  /** the model's reference, a file or an https:// URL (default: beside a local model, then the
   *  cache; for a model from an origin, the origin's `…/artifacts/<sha256>/reference`) */
  readonly reference?: string;
  /** only a reference signed by this publisher key (raw Ed25519, hex) */
  readonly publisherKey?: string;
  /** a SQLite file, or a postgres:// URL that any number of replicas share */
  readonly db: string;
  /** replicas: how often heartbeats go to the database and the others' writes come in
   *  (default a quarter of the lease, at most 1 s) */
  readonly syncMs?: number;
  /** nodes present it to register and heartbeat */
  readonly nodeToken: string;
  readonly leaseMs: number;
  readonly host: string;
  readonly port: number;
  /** where nodes reach it, when not the listen address (0.0.0.0, a forwarder): its certificate
   *  names this host, and spot checks give nodes this URL */
  readonly publicUrl?: string;
  /** to probe nodes reachable only through a relay */
  readonly relay?: { url: string; token: string };
  /** how often a serving node gets a spot check (0: never) */
  readonly spotCheckMs?: number;
  /** how routes' seams carry hidden states (default none: f32); auto: q8 where a hop goes through the relay */
  readonly seamCompression?: SeamCompressionPolicy;
  /** session slots on every layer that new sessions leave free for repairs (default 0) */
  readonly repairReserve?: number;
  /** calls one node name may make a minute (default 600; 0: no limit) */
  readonly nodeCallsPerMin?: number;
  /** the network's CA (certificate and key): the tracker serves HTTPS with a certificate of its
   *  own from it, certifies nodes' keys, and probes nodes over TLS trusting it alone */
  readonly ca?: CertPair;
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
  const { header, manifest } = o.model;
  const artifact = manifest.artifact;
  const reference = await loadReference(o);
  log.info("probe reference", {
    probes: reference.probes.length,
    engine: reference.engine,
    publisher: reference.publisher,
  });
  const ca = o.ca ? await openNetworkCa(o.ca) : undefined;
  if (ca) trustNetworkCa(ca.cert);
  const certHost = o.publicUrl ? new URL(o.publicUrl).hostname : o.host;
  const tls = ca ? await certifiedPair(ca, "tracker", certHosts(certHost)) : undefined;
  const shared = /^postgres(ql)?:\/\//.test(o.db);
  const store = shared ? await PgTrackerStore.open(o.db) : new TrackerStore(o.db);
  if (store instanceof PgTrackerStore) {
    // the first replica makes the route key; every other signs with the same
    await store.claimMeta(ROUTE_KEY_META, async () => JSON.stringify(await newRouteKeyText()));
  }
  const dialer = await Dialer.connect(o.relay, undefined, logRelay);
  const sink = new SpotSink(reference.nEmbd);
  const core = await TrackerCore.open({
    storage: store,
    model: {
      artifact,
      nLayer: reference.nLayer,
      manifest,
      kv: kvShape(header).layers,
      graph: headerGraphShape(header),
    },
    leaseMs: o.leaseMs,
    probe: (target, key) => probeNode(dialer.dial, key, reference, target),
    // the tracker's own URL poses as the next shard; known once it listens
    spot: (target, key) =>
      spotCheck(dialer.dial, key, reference, { url: o.publicUrl ?? server.url, sink }, target),
    seamCompression: o.seamCompression,
    repairReserve: o.repairReserve,
    claimSigner: syncClaimSigner,
    epochs: store instanceof PgTrackerStore
      ? new BlockEpochs((n, after) => store.reserveEpochs(n, after))
      : undefined,
    onEvent: logEvent,
    // plans and the route pool give way to the calls every few ms (src/tracker/steps.ts)
    giveWay: (resume) => setTimeout(resume, 0),
  });
  const syncing = store instanceof PgTrackerStore
    ? await replicate(store, core, o.syncMs ?? Math.min(1000, o.leaseMs / 4))
    : undefined;
  const tracker = trackerRoutes(core, o.nodeToken, certifier(ca), o.nodeCallsPerMin);
  const server = await listenConnect(
    (router) => {
      tracker(router);
      seamRoutes(
        sink.serve,
        () => Promise.resolve(create(NodeInfoSchema, { node: "tracker" })),
        tls !== undefined,
      )(
        router,
      );
    },
    o.host,
    o.port,
    // the tracker's own calls also come straight over TCP, without HTTP/2 (direct-calls.ts)
    directCallsSide(tracker),
    tls,
    // a tracker's nodes may share an address (a lab behind one NAT)
    Infinity,
  );
  const spotEvery = o.spotCheckMs ?? 60_000;
  const spotting = spotEvery > 0 ? setInterval(() => void spot(), spotEvery) : undefined;
  let inFlight = false;
  const spot = async () => {
    if (inFlight) return;
    inFlight = true;
    try {
      const r = await core.spotCheck();
      if (r) log.debug("spot check", { node: r.node, ok: r.verdict?.ok, detail: r.verdict?.detail });
    } finally {
      inFlight = false;
    }
  };
  log.info("tracker ready", {
    url: server.url,
    artifact,
    known_nodes: core.knownNodes,
    db: shared ? "postgres (replicas)" : "sqlite",
  });
  return {
    url: server.url,
    publicKey: core.routePublicKey,
    close: async () => {
      clearInterval(spotting);
      await syncing?.stop();
      dialer.close();
      await server.close();
      await store.close();
    },
  };
}

/** A replica's loop, every sync interval: its heartbeats out, the other replicas' writes in, the
 *  lead of placement taken when free. An ask or a plan change anywhere wakes it at once for the
 *  placement tables alone (the others' asks and plan lines in, the leader's plan out). */
async function replicate(store: PgTrackerStore, core: TrackerCore, everyMs: number) {
  let running: Promise<void> | undefined;
  // what the next run does: everything, or the placement tables alone
  let due: "none" | "placement" | "all" = "none";
  const tick = (what: "placement" | "all") => {
    if (due !== "all") due = what;
    if (running) return;
    const now = due;
    due = "none";
    running = (async () => {
      try {
        if (now === "all") {
          await store.flushBeats();
          core.absorb(await store.pull());
          const leading = await store.lead();
          if (leading !== core.leadsPlacement) log.info("placement", { leading });
          core.leadPlacement(leading);
        }
        core.absorb(await store.pullPlacement());
        core.publishPlan();
      } catch (e) {
        log.warn("tracker replica sync failed", { error: e instanceof Error ? e.message : String(e) });
      } finally {
        running = undefined;
        if (due !== "none") tick(due);
      }
    })();
  };
  // whether it leads is known before it serves a single ask
  core.leadPlacement(await store.lead());
  await store.onPlaceChange(() => tick("placement"));
  tick("all");
  const timer = setInterval(() => tick("all"), everyMs);
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}

/** A tracker without a reference cannot admit anyone: it says how to make one. */
export class NoReference extends Error {}

/** A reference answer may hold this much (a 1 GB model's is about 5 MB). */
const MAX_REFERENCE_BYTES = 512 << 20;

async function loadReference(o: TrackerOptions) {
  const { artifact } = o.model.manifest;
  const src = o.model.source;
  const where = o.reference ??
    ("url" in src ? `${src.url}/reference` : await findReference(src.path, artifact));
  if (!where) {
    const path = "path" in src ? src.path : "";
    throw new NoReference(
      `no probe reference for ${path} (artifact ${artifact.slice(0, 12)}…): the tracker checks ` +
        `nodes against one and never loads the model. Make it where the model is held: ` +
        `strata model certify ${path} --memory-cap SIZE (writes ${referenceBeside(path)}), ` +
        `or give --reference FILE|URL`,
    );
  }
  try {
    const ref = await openReference(await referenceBytes(where), { artifact, publisher: o.publisherKey });
    if (ref.nLayer !== o.model.manifest.nLayer) {
      throw new ReferenceError(`it has ${ref.nLayer} layers, the model's header ${o.model.manifest.nLayer}`);
    }
    return ref;
  } catch (e) {
    if (e instanceof ReferenceError) throw new NoReference(`reference ${where} refused: ${e.message}`);
    throw e;
  }
}

async function referenceBytes(where: string): Promise<Uint8Array> {
  if (!/^https?:\/\//.test(where)) return await Deno.readFile(where);
  const r = await trustedFetch()(where);
  if (!r.ok) {
    await r.body?.cancel();
    throw new NoReference(`reference ${where}: HTTP ${r.status}`);
  }
  const bytes = await readAtMost(r.body, MAX_REFERENCE_BYTES);
  if (!bytes) throw new NoReference(`reference ${where}: more than ${MAX_REFERENCE_BYTES} bytes`);
  return bytes;
}
