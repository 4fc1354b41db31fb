// The tracker's decisions, runtime-free: registrations and leases, admission bookkeeping,
// exact load, route choice and signed routes. The process around it (Connect server,
// SQLite, the probe's seam dialer and reference engine) plugs in through the options.
import { create } from "@bufbuild/protobuf";
import { bytesToHex, hexToBytes } from "../../bytes/hex.ts";
import { HopSchema } from "../../gen/strata/seam/v1/seam_pb.ts";
import {
  type DoneRequest,
  type DoneResponse,
  DoneResponseSchema,
  type HeartbeatRequest,
  type HeartbeatResponse,
  HeartbeatResponseSchema,
  type LeaveRequest,
  type LeaveResponse,
  LeaveResponseSchema,
  type NodesResponse,
  NodesResponseSchema,
  NodeStateSchema,
  type PlaceRequest,
  type PlaceResponse,
  PlaceResponseSchema,
  type RegisterRequest,
  type RegisterResponse,
  RegisterResponseSchema,
  type RouteRequest,
  type RouteResponse,
  RouteResponseSchema,
  RouteSchema,
} from "../../gen/strata/tracker/v1/tracker_pb.ts";
import { signRoute } from "../../route/plan.ts";
import { pipelineChunkFloor } from "../../route/prefill-pipeline.ts";
import type { ClaimSigner } from "../../route/ticket.ts";
import { type Admission, admissionOf, type Probe, type ProbeTarget } from "../admission/admission.ts";
import type { ProbeVerdict } from "../admission/probe.ts";
import { TrackerError } from "../errors.ts";
import { hopUrls } from "../routes/hop-urls.ts";
import { SessionLoad } from "../routes/load.ts";
import { checkRegistration, type TrackedModel } from "../membership/registration.ts";
import { Placer } from "../placement/placer.ts";
import { Registry } from "../membership/registry.ts";
import { routeCompression, type SeamCompressionPolicy } from "../routes/route-compression.ts";
import { chooseRoutes } from "../routes/route-choice.ts";
import { loadRouteKey, type TrackerRouteKey } from "../routes/route-key.ts";
import { type Candidate, disjointRouteSteps } from "../routes/select.ts";
import { RoutePool } from "../routes/route-pool.ts";
import { reserved } from "../routes/repair-reserve.ts";
import type { Beat, NodeRecord, PlanEntry, TrackerStorage } from "../membership/storage.ts";
import { ClockEpochs, type EpochSource } from "../routes/epochs.ts";
import { MAX_DONE_SESSIONS } from "../routes/session-ends.ts";
import { counter, type GiveWay, runAll, slicer, type Steps } from "../steps.ts";

/** Milliseconds since the epoch; injected so tests can move time. */
export type Clock = () => number;

/** A claim its node never reports is dropped after this long (or a lease, if longer). */
export const CLAIM_TTL_MS = 15_000;
/** How long a route's tickets stay valid. */
export const ROUTE_TICKET_TTL_MS = 3_600_000;
/** Past this many nodes, new sessions take routes from the pool (route-pool.ts) instead of
 *  every disjoint route worked out per request. */
export const POOL_MIN_NODES = 256;
/** A replica that does not lead placement waits this long for the leader's answer. */
export const PLACE_WAIT_MS = 10_000;
/** Who signs the tickets, as the claims name it. */
export const TRACKER_ISSUER = "tracker";

/** What happened, for the process to log. */
export type TrackerEvent =
  | { readonly kind: "registered"; readonly rec: NodeRecord }
  | { readonly kind: "admission"; readonly node: string; readonly admission: Admission }
  | { readonly kind: "left"; readonly node: string };

export interface TrackerCoreOptions {
  readonly storage: TrackerStorage;
  readonly model: TrackedModel;
  /** a node without a heartbeat this long is dropped from routes */
  readonly leaseMs: number;
  /** runs the admission probe on a node that registered */
  readonly probe: Probe;
  /**
   * checks a serving node the way its ordinary sessions look (default: the admission probe);
   * inconclusive (the node unreachable, its next hop refused) is `undefined`
   */
  readonly spot?: (target: ProbeTarget, routeKey: CryptoKey) => Promise<ProbeVerdict | undefined>;
  /** default none (f32) */
  readonly seamCompression?: SeamCompressionPolicy;
  /** session slots on every layer that new sessions leave free for repairs (default 0) */
  readonly repairReserve?: number;
  /** default: this tracker's own, from its start time */
  readonly epochs?: EpochSource;
  /** default Date.now */
  readonly clock?: Clock;
  /**
   * Lets the calls waiting run, then resumes (the server: a timer). With it, a placement plan
   * and the route pool are worked out in slices between calls; without it, at once (tests).
   */
  readonly giveWay?: GiveWay;
  /** default POOL_MIN_NODES */
  readonly poolMinNodes?: number;
  /**
   * signs route tickets with the route key given as PKCS#8 (default WebCrypto's async sign;
   * a synchronous one costs a quarter of the CPU per hop in Deno)
   */
  readonly claimSigner?: (pkcs8: Uint8Array) => ClaimSigner;
  readonly onEvent?: (e: TrackerEvent) => void;
}

export class TrackerCore {
  readonly #o: TrackerCoreOptions;
  readonly #key: TrackerRouteKey;
  readonly #sign: CryptoKey | ClaimSigner;
  readonly #now: Clock;
  readonly #registry: Registry;
  // a claim per node for each route handed out, plus what heartbeats report: exact load
  readonly #loads: SessionLoad;
  readonly #probes = new Set<Promise<void>>();
  /** probes running here, by node */
  readonly #probing = new Map<string, number>();
  // epochs only grow, across restarts and replicas too
  readonly #epochs: EpochSource;
  readonly #placer: Placer;
  readonly #pool: RoutePool;
  // places asked of this replica while another leads, until the leader's plan answers them
  readonly #awaiting = new Set<{ node: string; at: number; resolve: () => void }>();
  #replanTimer: ReturnType<typeof setTimeout> | undefined;
  // bumped whenever the routable network may have changed: the pool rebuilds after it
  #version = 0;
  /** live, admitted holders of each layer and whether any node has sessions (see #mayLeave) */
  #cover: { second: number; holders: number[]; busy: boolean } | undefined;
  // nodes a gateway found gone (named in a request's avoid list), and when: no route takes
  // them until they beat again, so a dead node does not keep drawing sessions for a lease
  readonly #suspects = new Map<string, number>();
  /**
   * told to move to another range, when: no new route goes through it until it registers
   * again, leaves, or (it did not go) a lease has passed
   */
  readonly #leaving = new Map<string, number>();

  private constructor(o: TrackerCoreOptions, key: TrackerRouteKey) {
    this.#o = o;
    this.#key = key;
    this.#sign = o.claimSigner?.(key.privatePkcs8) ?? key.privateKey;
    this.#now = o.clock ?? Date.now;
    this.#registry = new Registry(o.storage, o.leaseMs, this.#now());
    this.#loads = new SessionLoad({
      claimTtlMs: Math.max(CLAIM_TTL_MS, o.leaseMs),
      // a heartbeat older than a lease says nothing any more
      doneQuietMs: o.leaseMs,
    }, (node) => this.#pool.released(node));
    this.#epochs = o.epochs ?? new ClockEpochs(this.#now());
    const sliced = o.giveWay && slicer(o.giveWay);
    this.#pool = new RoutePool(
      function* (this: TrackerCore) {
        const cands = yield* this.#candidateSteps([], this.#now(), false);
        return yield* disjointRouteSteps(cands, o.model.nLayer, Infinity);
      }.bind(this),
      Math.random,
      sliced,
    );
    this.#placer = new Placer(
      o.model,
      {
        records: () => this.#registry.records(),
        record: (node) => this.#registry.get(node),
        isLive: (node, now) => this.#registry.isLive(node, now),
      },
      o.leaseMs,
      { slicer: sliced, onPlanned: () => this.#planned() },
    );
  }

  /** A tracker over what the storage kept: its route key (made on first use) and registrations. */
  static async open(o: TrackerCoreOptions): Promise<TrackerCore> {
    return new TrackerCore(o, await loadRouteKey(o.storage));
  }

  /** The raw public half of the route key: nodes verify tickets with it. */
  get routePublicKey(): Uint8Array {
    return this.#key.publicRaw;
  }

  /** How many nodes the tracker knows, live or not. */
  get knownNodes(): number {
    return this.#registry.size;
  }

  register(req: RegisterRequest): RegisterResponse {
    const rec = checkRegistration(req, this.#o.model);
    this.#registry.add(rec, this.#now());
    this.#leaving.delete(rec.node);
    this.#version++;
    // a node registering again lost whatever it held
    this.#loads.forget(rec.node);
    this.#o.onEvent?.({ kind: "registered", rec });
    // the lease is shared at once, not from the first heartbeat a third of a lease later: until
    // then the other replicas would know the node but not see it live
    this.#o.storage.saveBeat?.({ node: rec.node, at: this.#now(), sessions: 0, sessionIds: [] });
    this.#admit(rec);
    return create(RegisterResponseSchema, {
      leaseMs: BigInt(this.#o.leaseMs),
      routePublicKey: this.#key.publicRaw,
    });
  }

  heartbeat(req: HeartbeatRequest): HeartbeatResponse {
    const now = this.#now();
    // a node back from a lapsed lease, or named gone by a gateway, can be routed again
    if (!this.#registry.isLive(req.node, now) || this.#suspects.has(req.node)) this.#version++;
    const beaten = this.#registry.beat(req.node, req.sessions, now);
    if (!beaten) return create(HeartbeatResponseSchema, { known: false, admission: "" });
    const rec = this.#registry.remeasured(req.node, req.decodeTokensPerS) ?? beaten;
    if (rec !== beaten) this.#version++;
    // still pending, and no probe of it runs here: the replica that took its registration
    // stopped before its verdict was saved. Nobody else would ever probe it again.
    if (rec.admission === "pending" && !this.#probing.has(rec.node)) this.#admit(rec);
    this.#loads.report(req.node, { sessions: req.sessions, sessionIds: req.sessionIds }, now);
    this.#o.storage.saveBeat?.({
      node: req.node,
      at: now,
      sessions: req.sessions,
      sessionIds: req.sessionIds,
    });
    // a placed node whose plan changed is told where to go now, unless leaving would break the
    // network's last route while it serves sessions (it waits for another holder, or for quiet)
    const place = this.#placer.places(req.node) ? this.#placer.placeOf(req.node, now) : undefined;
    const moved = place && (place.start !== rec.start || place.end !== rec.end) &&
      this.#mayLeave(rec, place, now);
    // a session routed through it now would find it shutting down
    if (moved && !this.#leaving.has(req.node)) {
      this.#leaving.set(req.node, now);
      this.#version++;
    }
    return create(HeartbeatResponseSchema, {
      known: true,
      admission: rec.admission,
      place: moved ? place : undefined,
    });
  }

  /**
   * Whether a node may leave the range it holds now for `to`. A node reloading another range
   * serves nothing for minutes with a large model; a rebalance that took the only holder of
   * some layers away while sessions ran left every request without a route meanwhile (seen
   * with 2 GB ranges on a busy machine). So an admitted, live node leaves a layer nobody else
   * holds only while no node of the network has sessions. And a node with sessions of its own
   * stays until they end, unless it goes to layers nobody holds: each of them would have to
   * be repaired elsewhere, and a rebalance of three nodes under 8 chats sent every chat through
   * repairs for half a minute (the deploy test).
   */
  #mayLeave(rec: NodeRecord, to: { start: number; end: number }, now: number): boolean {
    if (rec.admission !== "admitted" || !this.#registry.isLive(rec.node, now)) return true;
    // holders per layer and whether any node has sessions, looked at once a second at most
    // (a rebalance of thousands of nodes asks this for each)
    const second = Math.floor(now / 1000);
    if (this.#cover?.second !== second) {
      const holders = new Array<number>(this.#o.model.nLayer).fill(0);
      let busy = false;
      for (const r of this.#registry.records()) {
        if (r.admission !== "admitted" || !this.#registry.isLive(r.node, now)) continue;
        for (let l = r.start; l < r.end; l++) holders[l]++;
        busy ||= this.#loads.load(r.node, now) > 0;
      }
      this.#cover = { second, holders, busy };
    }
    const c = this.#cover;
    let fillsHole = false;
    for (let l = to.start; l < to.end; l++) fillsHole ||= c.holders[l] === 0;
    if (!fillsHole && this.#loads.load(rec.node, now) > 0) return false;
    let alone = false;
    for (let l = rec.start; l < rec.end; l++) alone ||= c.holders[l] < 2;
    if (alone && c.busy) return false;
    // it leaves: the layers it held have one holder fewer until the next look
    for (let l = rec.start; l < rec.end; l++) c.holders[l]--;
    return true;
  }

  /** The range a node asking for one should hold; resource_exhausted when none fits it. */
  async place(req: PlaceRequest): Promise<PlaceResponse> {
    if (!req.node) throw new TrackerError("invalid_argument", "a placement request names the node");
    if (bytesToHex(req.artifactSha256) !== this.#o.model.artifact) {
      throw new TrackerError(
        "failed_precondition",
        `this tracker places artifact ${this.#o.model.artifact.slice(0, 12)}… only`,
      );
    }
    const at = this.#now();
    this.#placer.heard(req, at);
    this.#o.storage.saveAsk?.(req, at);
    // the ask waits for a plan that has placed it: the leader's next batch, or (a replica that
    // does not lead) the leader's plan as it reaches here, so every replica tells the same
    let range = this.#placer.placeOf(req.node, at);
    if (this.#placer.answered(req.node) < at) {
      this.#replanSoon();
      await this.#settled(req.node, at);
      range = this.#placer.placeOf(req.node, this.#now());
    } else {
      // placed by a plan made just now, for this ask: out with it (a batch's timer publishes
      // its own plan once, not once per ask it answered: each publish looks at every ask)
      this.publishPlan();
    }
    if (!range) {
      this.#placer.forget(req.node);
      this.publishPlan();
      throw new TrackerError(
        "resource_exhausted",
        `no range of the model is of use within ${(Number(req.memoryCapBytes) / 2 ** 30).toFixed(2)} GiB`,
      );
    }
    return create(PlaceResponseSchema, { range });
  }

  /** The leader places the asks waiting on it in one batch, soon. */
  #replanSoon(): void {
    if (!this.#placer.leading || this.#replanTimer !== undefined) return;
    this.#replanTimer = setTimeout(() => {
      this.#replanTimer = undefined;
      this.#placer.replan(this.#now());
      this.publishPlan();
      for (const w of [...this.#awaiting]) this.#awaitingDone(w);
    }, this.#placer.batchMs);
  }

  /** A plan worked out in slices landed: out with it, and the asks it answered are told. */
  #planned(): void {
    this.publishPlan();
    for (const w of [...this.#awaiting]) this.#awaitingDone(w);
    // asks heard while it was worked out wait for the next
    if (this.#awaiting.size > 0) this.#replanSoon();
  }

  /** Resolves once the plan in force (this replica's, or the leader's as adopted) has answered
   *  `node`'s ask of `at`. */
  #settled(node: string, at: number): Promise<void> {
    if (this.#placer.answered(node) >= at) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#awaiting.delete(w);
        reject(new TrackerError("unavailable", "no tracker replica leads placement now; ask again"));
      }, PLACE_WAIT_MS);
      const w = { node, at, resolve: () => (clearTimeout(timer), resolve()) };
      this.#awaiting.add(w);
    });
  }

  get leadsPlacement(): boolean {
    return this.#placer.leading;
  }

  /** Leads placement (one tracker, or the replica holding the lead) or follows the plan the
   *  leader publishes. */
  leadPlacement(leading: boolean): void {
    this.#placer.lead(leading, this.#now());
    if (leading && this.#awaiting.size > 0) this.#replanSoon();
  }

  /** The leader's changes to the plan since it last published, out to storage. */
  publishPlan(): void {
    if (!this.#o.storage.savePlan || !this.#placer.leading) return;
    const entries = this.#placer.published(this.#now());
    if (entries.length > 0) this.#o.storage.savePlan(entries);
  }

  #awaitingDone(w: { node: string; at: number; resolve: () => void }): void {
    if (this.#placer.answered(w.node) < w.at) return;
    this.#awaiting.delete(w);
    w.resolve();
  }

  /** The placement in force: each placed node's range. */
  placement(): ReadonlyMap<string, { start: number; end: number } | undefined> {
    return this.#placer.plan(this.#now());
  }

  leave(req: LeaveRequest): LeaveResponse {
    this.#placer.forget(req.node);
    const known = this.#registry.remove(req.node);
    this.#suspects.delete(req.node);
    this.#leaving.delete(req.node);
    this.#version++;
    this.#loads.forget(req.node);
    if (known) this.#o.onEvent?.({ kind: "left", node: req.node });
    return create(LeaveResponseSchema, { known });
  }

  /** The gateway's word that sessions ended: their claims go at once. */
  done(req: DoneRequest): DoneResponse {
    const ids = req.sessionId ? [req.sessionId, ...req.sessionIds] : req.sessionIds;
    if (ids.length === 0 || ids.some((id) => !id)) {
      throw new TrackerError("invalid_argument", "done names sessions, none of them empty");
    }
    if (ids.length > MAX_DONE_SESSIONS) {
      throw new TrackerError(
        "invalid_argument",
        `done names ${ids.length} sessions; at most ${MAX_DONE_SESSIONS} in one call`,
      );
    }
    const now = this.#now();
    let released = 0;
    for (const id of ids) released += this.#loads.done(id, now);
    return create(DoneResponseSchema, { released });
  }

  /** Routes for one session, with a signed ticket per hop. */
  async route(req: RouteRequest): Promise<RouteResponse> {
    // selection and load accounting happen before the first await: concurrent requests
    // must see each other's claims
    if (bytesToHex(req.artifactSha256) !== this.#o.model.artifact) {
      throw new TrackerError("not_found", "unknown model artifact");
    }
    if (!req.sessionId) throw new TrackerError("invalid_argument", "a route is asked for one session");
    const now = this.#now();
    for (const node of req.avoidNodes) if (this.#registry.get(node)) this.#suspects.set(node, now);
    const chosen = this.#choose(req, now);
    const picked = chosen.map((rt) => {
      for (const c of rt) {
        this.#registry.assigned(c.node);
        this.#loads.claim(c.node, req.sessionId, now);
      }
      const records = rt.map((c) => this.#registry.get(c.node)!);
      return {
        rt,
        urls: hopUrls(records.map((r) => r.urls)),
        chunkFloor: pipelineChunkFloor(records.map((r) => r.engine)),
      };
    });
    const epochs = await this.#epochs.take(picked.length, req.afterEpoch);
    const routes = await Promise.all(picked.map(async ({ rt, urls, chunkFloor }, i) => {
      const epoch = epochs[i];
      const hops = await signRoute(
        this.#sign,
        rt.map((c, i) => ({ url: urls[i], range: c.range })),
        { sessionId: req.sessionId, routeEpoch: epoch, artifactSha256: req.artifactSha256 },
        ROUTE_TICKET_TTL_MS,
        TRACKER_ISSUER,
        now,
      );
      return create(RouteSchema, {
        epoch,
        seamCompression: routeCompression(this.#o.seamCompression ?? "none", urls),
        hops: hops.map((h, i) =>
          create(HopSchema, { url: h.url, range: h.range, routeTicket: h.ticket, node: rt[i].node })
        ),
        // a session may take at most what the tightest node lets one session hold
        maxSessionCells: Math.min(...rt.map((c) => c.sessionCells)),
        name: rt.map((c) => c.node).join("+"),
        pipelineChunkFloor: chunkFloor,
      });
    }));
    return create(RouteResponseSchema, { routes });
  }

  /** The routes for a request: from the pool for a new session in a large network, else every
   *  disjoint route over the nodes worked out now (repairs, the repair reserve, small networks). */
  #choose(req: RouteRequest, now: number): Candidate[][] {
    const keeps = req.keepNodes.length > 0;
    const repair = req.avoidNodes.length > 0 || keeps;
    const nLayer = this.#o.model.nLayer;
    const reserve = this.#o.repairReserve ?? 0;
    // A session asked for again around nodes its gateway found gone takes a pooled route too:
    // the nodes it names are suspects now, and no pooled route through a suspect is looked at.
    // (Working every route out for it cost a pass over every node's load: at 10,000 nodes,
    // tens of milliseconds a request, most of a replica's time in routes.)
    // a standby route (other_than) is worked out too: the pool knows nothing of what it avoids
    const standby = req.otherThan.length > 0;
    if (
      !keeps && !standby && reserve === 0 && this.#registry.size > (this.#o.poolMinNodes ?? POOL_MIN_NODES)
    ) {
      const load = (rt: readonly Candidate[]) => this.#routeLoad(rt, now);
      // prefix affinity: the route through the nodes that hold the prompt's prefix, if it has room
      const warm = req.count <= 1 && req.preferNodes.length > 0 && !repair
        ? this.#pool.through(req.preferNodes, this.#version, now, load)
        : undefined;
      if (warm) return [warm];
      const picked = this.#pool.pick(req.count, this.#version, now, load);
      if (picked.routes.length > 0) return picked.routes;
      // routes, only full: the gateway waits (working every route out again to say so would
      // cost a pass over the network for each waiting request)
      if (picked.busy && !repair) throw new TrackerError("resource_exhausted", "all routes are busy");
    }
    const cands = this.#candidates([...req.avoidNodes, ...req.otherThan], now)
      .map((c) => req.keepNodes.includes(c.node) ? { ...c, kept: true } : c)
      .map((c) => req.preferNodes.includes(c.node) ? { ...c, preferred: true } : c);
    // a repair (or a retry on other nodes) may take the slots new sessions leave free
    return chooseRoutes(repair ? cands : reserved(cands, nLayer, reserve), nLayer, req.count);
  }

  /** A pooled route's load now (its fullest node's), or undefined when it cannot be used. */
  #routeLoad(rt: readonly Candidate[], now: number): number | undefined {
    let worst = 0;
    for (const c of rt) {
      const r = this.#registry.get(c.node);
      if (
        !r || r.admission !== "admitted" || r.start !== c.range.start || r.end !== c.range.end ||
        !this.#registry.isLive(c.node, now) || this.#suspected(c.node) || this.#isLeaving(c.node, now)
      ) return undefined;
      worst = Math.max(worst, this.#loads.load(c.node, now) / Math.max(1, r.maxSessions));
    }
    return worst;
  }

  /** Told to move, and neither gone nor back since (for a lease at most). */
  #isLeaving(node: string, now: number): boolean {
    const at = this.#leaving.get(node);
    if (at === undefined) return false;
    if (now - at <= this.#o.leaseMs) return true;
    this.#leaving.delete(node);
    this.#version++;
    return false;
  }

  /** Named gone by a gateway, and not heard from since. */
  #suspected(node: string): boolean {
    const at = this.#suspects.get(node);
    if (at === undefined) return false;
    if ((this.#registry.lease(node)?.lastBeat ?? -Infinity) > at) {
      this.#suspects.delete(node);
      return false;
    }
    return true;
  }

  /** Every known node (or only those named): its advert, admission, lease and load. */
  nodes(only: readonly string[] = []): NodesResponse {
    const now = this.#now();
    const records = only.length
      ? only.flatMap((n) => this.#registry.get(n) ?? [])
      : [...this.#registry.records()];
    return create(NodesResponseSchema, {
      routePublicKey: this.#key.publicRaw,
      nodes: records.map((r) => {
        const lease = this.#registry.lease(r.node);
        return create(NodeStateSchema, {
          node: r.node,
          urls: [...r.urls],
          shard: {
            artifactSha256: hexToBytes(r.artifact),
            range: { start: r.start, end: r.end },
            engine: r.engine,
            kvCells: r.kvCells,
            sessionCells: r.sessionCells,
            maxSessions: r.maxSessions,
            decodeTokensPerS: r.tokensPerS,
            artifactUrl: r.artifactUrl,
            memoryCapBytes: BigInt(r.memoryCapBytes),
          },
          admission: r.admission,
          live: this.#registry.isLive(r.node, now),
          sessions: lease?.sessions ?? 0,
          routesAssigned: BigInt(lease?.assigned ?? 0),
          load: this.#loads.load(r.node, now),
        });
      }),
    });
  }

  /**
   * What other tracker replicas saved: registrations (new, re-registered, or with a verdict),
   * nodes gone, heartbeats, asks for a range and the placement leader's plan. Routes and
   * placement here then see them as their own.
   */
  absorb(changes: {
    readonly records?: readonly NodeRecord[];
    readonly gone?: readonly string[];
    readonly beats?: readonly Beat[];
    readonly asks?: readonly { readonly req: PlaceRequest; readonly at: number }[];
    readonly plan?: readonly PlanEntry[];
  }): void {
    // asks other replicas took: the leader places them in its next batch
    for (const a of changes.asks ?? []) if (this.#placer.heard(a.req, a.at)) this.#replanSoon();
    if (!this.#placer.leading && changes.plan?.length) {
      this.#placer.adopt(changes.plan);
      for (const w of [...this.#awaiting]) this.#awaitingDone(w);
      // an ask the leader refused (no range, nothing held) is gone here too (a place waiting
      // on it reads no range, after this)
      for (const e of changes.plan) if (!e.range && !this.#registry.get(e.node)) this.#placer.forget(e.node);
    }
    const { records = [], gone = [], beats = [] } = changes;
    if (records.length > 0 || gone.length > 0) this.#version++;
    for (const rec of records) {
      const old = this.#registry.get(rec.node);
      this.#registry.absorb(rec);
      if (!old || old.start !== rec.start || old.end !== rec.end) this.#loads.forget(rec.node);
      if (!old) this.#o.onEvent?.({ kind: "registered", rec });
    }
    for (const node of gone) {
      this.#suspects.delete(node);
      this.#leaving.delete(node);
      this.#placer.forget(node);
      this.#loads.forget(node);
      if (this.#registry.forget(node)) this.#o.onEvent?.({ kind: "left", node });
    }
    const now = this.#now();
    for (const b of beats) {
      if (!this.#registry.isLive(b.node, now) || this.#suspects.has(b.node)) this.#version++;
      if (this.#registry.beatAt(b.node, b.at, b.sessions)) this.#loads.report(b.node, b, now);
    }
  }

  /** Resolves when every probe started so far has its verdict booked. */
  async admissionsSettled(): Promise<void> {
    while (this.#probes.size > 0) await Promise.all(this.#probes);
  }

  /** Admitted, live nodes not to avoid, with their load as a share of what they take; without
   *  it (`loaded` false) for the pool, which works routes out by speed alone: counting load was
   *  most of the cost of a pass over 10,000 nodes. */
  #candidates(avoid: readonly string[], now: number, loaded = true): Candidate[] {
    return runAll(this.#candidateSteps(avoid, now, loaded));
  }

  *#candidateSteps(avoid: readonly string[], now: number, loaded: boolean): Steps<Candidate[]> {
    const cands: Candidate[] = [];
    const tick = counter(1024);
    for (const r of this.#registry.records()) {
      if (tick()) yield;
      if (
        r.admission !== "admitted" || !this.#registry.isLive(r.node, now) || avoid.includes(r.node) ||
        this.#suspected(r.node) || this.#isLeaving(r.node, now)
      ) {
        continue;
      }
      const sessions = loaded ? this.#loads.load(r.node, now) : 0;
      cands.push({
        node: r.node,
        url: r.urls[0],
        range: { start: r.start, end: r.end },
        load: sessions / Math.max(1, r.maxSessions),
        tokensPerS: r.tokensPerS,
        kvCells: r.kvCells,
        sessionCells: r.sessionCells,
        freeSlots: Math.max(0, r.maxSessions - sessions),
      });
    }
    return cands;
  }

  /**
   * Checks one live, admitted node picked at random (`pick` in [0, 1)); a node whose output is
   * wrong is refused and leaves every route. Returns what was checked, if anything.
   */
  async spotCheck(pick = Math.random()): Promise<{ node: string; verdict?: ProbeVerdict } | undefined> {
    const now = this.#now();
    const serving = [...this.#registry.records()].filter((r) =>
      r.admission === "admitted" && this.#registry.isLive(r.node, now)
    );
    if (serving.length === 0) return undefined;
    const rec = serving[Math.min(serving.length - 1, Math.floor(pick * serving.length))];
    const [epoch] = await this.#epochs.take(1, 0n);
    const target = this.#target(rec, epoch);
    const check = this.#o.spot ?? this.#o.probe;
    const verdict = await check(target, this.#key.privateKey).catch(() => undefined);
    if (verdict && !verdict.ok) {
      const admission: Admission = `refused: spot check: ${verdict.detail}`;
      if (this.#registry.settle(rec, admission)) {
        this.#version++;
        this.#o.onEvent?.({ kind: "admission", node: rec.node, admission });
      }
    }
    return { node: rec.node, verdict };
  }

  #target(rec: NodeRecord, epoch?: bigint): ProbeTarget {
    return {
      node: rec.node,
      url: rec.urls[0],
      range: { start: rec.start, end: rec.end },
      engine: rec.engine,
      artifact: hexToBytes(rec.artifact),
      epoch,
    };
  }

  /** Probes the node in the background; the verdict counts only if the record still stands. */
  #admit(rec: NodeRecord): void {
    this.#probing.set(rec.node, (this.#probing.get(rec.node) ?? 0) + 1);
    const p = (async () => {
      let admission: Admission;
      try {
        admission = admissionOf(
          await this.#o.probe(this.#target(rec), this.#key.privateKey),
        );
      } catch (e) {
        admission = `refused: probe failed: ${e instanceof Error ? e.message : e}`;
      }
      if (this.#registry.settle(rec, admission)) {
        this.#version++;
        this.#o.onEvent?.({ kind: "admission", node: rec.node, admission });
      }
    })();
    this.#probes.add(p);
    void p.finally(() => {
      this.#probes.delete(p);
      const left = this.#probing.get(rec.node)! - 1;
      if (left > 0) this.#probing.set(rec.node, left);
      else this.#probing.delete(rec.node);
    });
  }
}
