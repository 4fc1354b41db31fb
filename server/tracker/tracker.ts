// The tracker process: registrations (persisted), leases (heartbeats), admission probes,
// route selection and ticket signing, served as a Connect service over HTTP/2.
import { bytesToHex, hexToBytes } from "../../src/bytes/hex.ts";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { HopSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import {
  type DoneRequest,
  type HeartbeatRequest,
  type LeaveRequest,
  NodeStateSchema,
  type RegisterRequest,
  type RouteRequest,
  RouteSchema,
  TrackerService,
} from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { signTicket } from "../../src/route/ticket.ts";
import { importPrivateRouteKey, newRouteKeyText, type RouteKeyText } from "../../src/route/keys.ts";
import { type Candidate, disjointRoutes, noRouteReason } from "../../src/tracker/select.ts";
import { SessionLoad } from "../../src/tracker/load.ts";
import type { NativeBackend } from "../engine/native/build.ts";
import { sha256File } from "../model/hash.ts";
import { Dialer } from "../seam/dialer.ts";
import { listenConnect } from "../http/http2.ts";
import { log } from "../log/log.ts";
import { probeNode } from "./admission.ts";
import { probeReference } from "./reference.ts";
import { readHeader } from "../model/facts.ts";
import { buildManifest, shardBytes } from "../../src/gguf/manifest.ts";
import { arch, metaNumber } from "../../src/gguf/reader.ts";
import { memoryMisfit, rangeMemory } from "../../src/engine/memory-fit.ts";
import { type NodeRecord, TrackerStore } from "./store.ts";
import { Compression } from "../../src/gen/strata/seam/v1/seam_pb.ts";

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

export type SeamCompressionPolicy = "none" | "q8" | "auto";

/** The route's seam encoding under the policy: the relay (WebSocket) is the narrow path. */
export function routeCompression(policy: SeamCompressionPolicy, hopUrls: readonly string[]): Compression {
  if (policy === "q8") return Compression.Q8_BLOCK32;
  if (policy === "none") return Compression.NONE;
  return hopUrls.some((u) => u.startsWith("relay+")) ? Compression.Q8_BLOCK32 : Compression.NONE;
}

interface Live {
  lastBeat: number;
  /** sessions the node reported open in its last heartbeat */
  sessions: number;
  assigned: number;
}

/** A claim its node never reports is dropped after this long (or a lease, if longer). */
export const CLAIM_TTL_MS = 15_000;

function sameSecret(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let d = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) d |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return d === 0;
}

export async function startTracker(o: TrackerOptions) {
  const store = new TrackerStore(o.dbPath);
  const keys = await routeKeys(store);
  const [artifact, reference, header] = await Promise.all([
    sha256File(o.modelPath),
    probeReference(o.modelPath, o.backend),
    readHeader(o.modelPath),
  ]);
  const manifest = buildManifest(header, (await Deno.stat(o.modelPath)).size, artifact);
  const a = arch(header);
  const nEmbd = metaNumber(header, `${a}.embedding_length`) ?? 0;
  const nHead = metaNumber(header, `${a}.attention.head_count`) ?? 1;
  const nEmbdKv = nEmbd * (metaNumber(header, `${a}.attention.head_count_kv`) ?? nHead) / nHead;
  const dialer = await Dialer.connect(o.relay);
  const records = new Map(store.nodes().map((r) => [r.node, r]));
  const live = new Map<string, Live>();
  // a claim per node for each route handed out, plus what heartbeats report: exact load
  const loads = new SessionLoad({
    claimTtlMs: Math.max(CLAIM_TTL_MS, o.leaseMs),
    // a heartbeat older than a lease says nothing any more
    doneQuietMs: o.leaseMs,
  });
  // epochs only grow, across restarts too
  let epoch = BigInt(Date.now()) * 1000n;

  const auth = (token: string) => {
    if (!sameSecret(token, o.nodeToken)) throw new ConnectError("node token refused", Code.Unauthenticated);
  };
  const isLive = (node: string, now = Date.now()) => {
    const l = live.get(node);
    return !!l && now - l.lastBeat <= o.leaseMs;
  };

  async function admit(rec: NodeRecord): Promise<void> {
    const verdict = await probeNode(dialer.dial, keys.privateKey, reference, {
      node: rec.node,
      url: rec.urls[0],
      range: { start: rec.start, end: rec.end },
      engine: rec.engine,
      artifact: hexToBytes(rec.artifact),
    });
    const current = records.get(rec.node);
    if (current !== rec) return; // re-registered meanwhile
    const admitted = { ...rec, admission: verdict.ok ? "admitted" : `refused: ${verdict.detail}` };
    records.set(rec.node, admitted);
    store.saveNode(admitted);
    log[verdict.ok ? "info" : "warn"]("admission", { node: rec.node, verdict: admitted.admission });
  }

  const service = {
    register(req: RegisterRequest) {
      auth(req.token);
      const s = req.shard;
      if (!req.node || !s?.range || req.urls.length === 0) {
        throw new ConnectError("a registration names the node, its URLs and its shard", Code.InvalidArgument);
      }
      if (bytesToHex(s.artifactSha256) !== artifact) {
        throw new ConnectError(
          `this tracker routes artifact ${artifact.slice(0, 12)}… only`,
          Code.FailedPrecondition,
        );
      }
      if (s.range.start >= s.range.end || s.range.end > reference.nLayer) {
        throw new ConnectError(
          `layers ${s.range.start}:${s.range.end} of ${reference.nLayer}`,
          Code.InvalidArgument,
        );
      }
      // an engine with a memory cap (wasm32) is never given a range it cannot hold
      const misfit = memoryMisfit(
        rangeMemory({
          weightBytes: shardBytes(manifest, s.range.start, s.range.end).bytes,
          layers: s.range.end - s.range.start,
          kvCells: s.kvCells,
          nEmbdKv,
        }),
        Number(s.memoryCapBytes),
      );
      if (misfit) {
        throw new ConnectError(
          `layers ${s.range.start}:${s.range.end} with ${s.kvCells} KV cells ${misfit}`,
          Code.ResourceExhausted,
        );
      }
      const rec: NodeRecord = {
        node: req.node,
        urls: req.urls,
        artifact,
        start: s.range.start,
        end: s.range.end,
        engine: s.engine,
        kvCells: s.kvCells,
        sessionCells: Math.min(s.sessionCells || s.kvCells, s.kvCells),
        maxSessions: s.maxSessions,
        tokensPerS: s.decodeTokensPerS,
        artifactUrl: s.artifactUrl,
        admission: "pending",
      };
      records.set(rec.node, rec);
      store.saveNode(rec);
      live.set(rec.node, { lastBeat: Date.now(), sessions: 0, assigned: live.get(rec.node)?.assigned ?? 0 });
      // a node registering again lost whatever it held
      loads.forget(rec.node);
      log.info("node registered", { node: rec.node, layers: `${rec.start}:${rec.end}`, urls: rec.urls });
      void admit(rec);
      return { leaseMs: BigInt(o.leaseMs), routePublicKey: keys.publicRaw };
    },

    heartbeat(req: HeartbeatRequest) {
      auth(req.token);
      const rec = records.get(req.node);
      if (!rec) return { known: false, admission: "" };
      const now = Date.now();
      live.set(req.node, {
        lastBeat: now,
        sessions: req.sessions,
        assigned: live.get(req.node)?.assigned ?? 0,
      });
      loads.report(req.node, { sessions: req.sessions, sessionIds: req.sessionIds }, now);
      return { known: true, admission: rec.admission };
    },

    leave(req: LeaveRequest) {
      auth(req.token);
      const known = records.delete(req.node);
      live.delete(req.node);
      loads.forget(req.node);
      store.deleteNode(req.node);
      if (known) log.info("node left", { node: req.node });
      return { known };
    },

    done(req: DoneRequest) {
      if (!req.sessionId) throw new ConnectError("done names a session", Code.InvalidArgument);
      return { released: loads.done(req.sessionId, Date.now()) };
    },

    async route(req: RouteRequest) {
      // (async only for signing; selection and load accounting happen before the first await)
      if (bytesToHex(req.artifactSha256) !== artifact) {
        throw new ConnectError("unknown model artifact", Code.NotFound);
      }
      if (!req.sessionId) throw new ConnectError("a route is asked for one session", Code.InvalidArgument);
      const now = Date.now();
      const cands: Candidate[] = [];
      for (const r of records.values()) {
        const l = live.get(r.node);
        if (r.admission !== "admitted" || !l || !isLive(r.node, now) || req.avoidNodes.includes(r.node)) {
          continue;
        }
        cands.push({
          node: r.node,
          url: r.urls[0],
          range: { start: r.start, end: r.end },
          load: loads.load(r.node, now) / Math.max(1, r.maxSessions),
          tokensPerS: r.tokensPerS,
          kvCells: r.kvCells,
          sessionCells: r.sessionCells,
        });
      }
      // every disjoint route, least loaded first: independent requests spread over them
      const all = disjointRoutes(cands, reference.nLayer, cands.length);
      const load = (rt: Candidate[]) => Math.max(...rt.map((c) => c.load));
      all.sort((a, b) => load(a) - load(b));
      const chosen = all.slice(0, Math.max(1, req.count));
      if (chosen.length === 0) {
        // full is not absent: a gateway waits for a full route, and fails on no route
        if (noRouteReason(cands, reference.nLayer) === "busy") {
          throw new ConnectError("all routes are busy", Code.ResourceExhausted);
        }
        throw new ConnectError("no complete route of admitted, live nodes", Code.Unavailable);
      }
      // a node reachable only through the relay (a browser tab) can dial only through it too
      const relayOnly = (node: string) => records.get(node)!.urls.every((u) => u.startsWith("relay+"));
      const hopUrls = (rt: Candidate[]) =>
        rt.map((c, i) =>
          i > 0 && relayOnly(rt[i - 1].node)
            ? records.get(c.node)!.urls.find((u) => u.startsWith("relay+")) ?? c.url
            : c.url
        );
      // claim before any await: concurrent requests must see each other
      const picked = chosen.map((rt) => {
        for (const c of rt) {
          live.get(c.node)!.assigned++;
          loads.claim(c.node, req.sessionId, now);
        }
        return { rt, urls: hopUrls(rt), e: ++epoch };
      });
      const routes = await Promise.all(picked.map(async ({ rt, urls, e }) =>
        create(RouteSchema, {
          epoch: e,
          seamCompression: routeCompression(o.seamCompression ?? "none", urls),
          hops: await Promise.all(rt.map(async (c, i) =>
            create(HopSchema, {
              url: urls[i],
              range: c.range,
              routeTicket: await signTicket(
                keys.privateKey,
                {
                  sessionId: req.sessionId,
                  routeEpoch: e,
                  artifactSha256: req.artifactSha256,
                  range: c.range,
                },
                3_600_000,
                "tracker",
              ),
            })
          )),
          // a session may take at most what the tightest node lets one session hold
          maxSessionCells: Math.min(...rt.map((c) => c.sessionCells)),
          name: rt.map((c) => c.node).join("+"),
        })
      ));
      return { routes };
    },

    nodes() {
      const now = Date.now();
      return {
        nodes: [...records.values()].map((r) =>
          create(NodeStateSchema, {
            node: r.node,
            urls: r.urls,
            shard: {
              artifactSha256: hexToBytes(r.artifact),
              range: { start: r.start, end: r.end },
              engine: r.engine,
              kvCells: r.kvCells,
              sessionCells: r.sessionCells,
              maxSessions: r.maxSessions,
              decodeTokensPerS: r.tokensPerS,
              artifactUrl: r.artifactUrl,
            },
            admission: r.admission,
            live: isLive(r.node, now),
            sessions: live.get(r.node)?.sessions ?? 0,
            routesAssigned: BigInt(live.get(r.node)?.assigned ?? 0),
            load: loads.load(r.node, now),
          })
        ),
      };
    },
  };

  const server = await listenConnect((router) => router.service(TrackerService, service), o.host, o.port);
  log.info("tracker ready", { url: server.url, artifact, known_nodes: records.size });
  return {
    url: server.url,
    publicKey: keys.publicRaw,
    close: async () => {
      dialer.close();
      await server.close();
      store.close();
    },
  };
}

/** The route key survives restarts, so tickets already out stay valid. */
async function routeKeys(store: TrackerStore) {
  let text = store.meta("route_key");
  if (!text) {
    text = JSON.stringify(await newRouteKeyText());
    store.setMeta("route_key", text);
  }
  const k = JSON.parse(text) as RouteKeyText;
  return {
    privateKey: await importPrivateRouteKey(k),
    publicRaw: Uint8Array.from(atob(k.public), (c) => c.charCodeAt(0)),
  };
}
