// The tracker process: the core (registrations, leases, admissions, routes) over SQLite,
// probing nodes through a seam dialer against the model's signed reference file (it reads
// the model's header, never a weight), served as a Connect service over HTTP/2.
import { sha256File } from "../model/hash.ts";
import { Dialer } from "../seam/dialer.ts";
import { listenConnect } from "../http/http2.ts";
import { directCallsSide } from "./direct-calls.ts";
import { log } from "../log/log.ts";
import { probeNode } from "./admission.ts";
import { spotCheck, SpotSink } from "./spot-check.ts";
import { seamRoutes } from "../seam/grpc.ts";
import { create } from "@bufbuild/protobuf";
import { NodeInfoSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { openReference, ReferenceError } from "../../src/tracker/reference.ts";
import { findReference, referenceBeside } from "../model/reference-file.ts";
import { readHeader } from "../model/facts.ts";
import { buildManifest } from "../../src/gguf/manifest.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { headerGraphShape } from "../../src/gguf/graph-shape.ts";
import type { SeamCompressionPolicy } from "../../src/tracker/route-compression.ts";
import { TrackerCore, type TrackerEvent } from "../../src/tracker/tracker-core.ts";
import { TrackerStore } from "./store.ts";
import { PgTrackerStore } from "./pg-store.ts";
import { trackerRoutes } from "./service.ts";
import { BlockEpochs } from "../../src/tracker/epochs.ts";
import { ROUTE_KEY_META } from "../../src/tracker/route-key.ts";
import { newRouteKeyText } from "../../src/route/keys.ts";
import { syncClaimSigner } from "./claim-signer.ts";
import { certifier } from "./certify.ts";
import { certHosts, certifiedPair, type CertPair, openNetworkCa } from "../tls/certs.ts";
import { trustNetworkCa } from "../tls/trust.ts";

export interface TrackerOptions {
  readonly modelPath: string;
  /** the model's reference file (default: beside the model, then the cache) */
  readonly referencePath?: string;
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
  const [artifact, header] = await Promise.all([sha256File(o.modelPath), readHeader(o.modelPath)]);
  const reference = await loadReference(o, artifact);
  log.info("probe reference", {
    probes: reference.probes.length,
    engine: reference.engine,
    publisher: reference.publisher,
  });
  const ca = o.ca ? await openNetworkCa(o.ca) : undefined;
  if (ca) trustNetworkCa(ca.cert);
  const tls = ca ? await certifiedPair(ca, "tracker", certHosts(o.host)) : undefined;
  const shared = /^postgres(ql)?:\/\//.test(o.db);
  const store = shared ? await PgTrackerStore.open(o.db) : new TrackerStore(o.db);
  if (store instanceof PgTrackerStore) {
    // the first replica makes the route key; every other signs with the same
    await store.claimMeta(ROUTE_KEY_META, async () => JSON.stringify(await newRouteKeyText()));
  }
  const manifest = buildManifest(header, (await Deno.stat(o.modelPath)).size, artifact);
  const dialer = await Dialer.connect(o.relay);
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
    spot: (target, key) => spotCheck(dialer.dial, key, reference, { url: server.url, sink }, target),
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

async function loadReference(o: TrackerOptions, artifact: string) {
  const path = o.referencePath ?? await findReference(o.modelPath, artifact);
  if (!path) {
    throw new NoReference(
      `no probe reference for ${o.modelPath} (artifact ${artifact.slice(0, 12)}…): the tracker checks ` +
        `nodes against one and never loads the model. Make it where the model is held: ` +
        `strata model certify ${o.modelPath} --memory-cap SIZE (writes ${referenceBeside(o.modelPath)}), ` +
        `or give --reference FILE`,
    );
  }
  try {
    return await openReference(await Deno.readFile(path), { artifact, publisher: o.publisherKey });
  } catch (e) {
    if (e instanceof ReferenceError) throw new NoReference(`reference ${path} refused: ${e.message}`);
    throw e;
  }
}
