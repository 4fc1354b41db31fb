// A node's membership in a tracker, the same on every host: register (advertising its shard),
// then heartbeats that renew the lease and report exact load, registering again whenever
// the tracker forgot it. A host supplies only how to reach the tracker (TrackerPort).
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ShardAdvertSchema } from "../gen/strata/tracker/v1/tracker_pb.ts";
import { importPublicRouteKey } from "../route/keys.ts";
import type { ShardNode } from "./shard-node.ts";

export type ShardAdvert = MessageInitShape<typeof ShardAdvertSchema>;

export interface NodeLoad {
  readonly sessions: number;
  /** the sessions open here: with the routes handed out, the tracker's exact load */
  readonly sessionIds: string[];
  readonly kvCellsUsed: number;
  readonly queued: number;
  /** one session's decode rate as traffic measured it (0: not yet) */
  readonly decodeTokensPerS?: number;
}

/** How a host reaches the tracker: Connect from a server, the gateway's JSON API from a tab. */
export interface TrackerPort {
  register(urls: string[], shard: ShardAdvert): Promise<{ leaseMs: number; routePublicKey: Uint8Array }>;
  heartbeat(
    load: NodeLoad,
    timeoutMs: number,
  ): Promise<{ known: boolean; admission: string; place?: { start: number; end: number } }>;
  leave(): Promise<void>;
  close(): void;
}

export interface Membership {
  /** the tracker's route key (public): tickets are verified with it */
  readonly routeKey: CryptoKey;
  /** "pending", "admitted" or "refused: …" as of the last heartbeat */
  readonly admission: string;
  /** stops the heartbeats; leave: also tell the tracker at once (else the lease lapses) */
  stop(o?: { leave?: boolean }): Promise<void>;
}

export interface MembershipEvents {
  onAdmission?(admission: string): void;
  /** the tracker places this node elsewhere now (`--layers auto`) */
  onPlace?(range: { start: number; end: number }): void;
  onBeatFailed?(error: unknown): void;
}

export async function joinTracker(
  tracker: TrackerPort,
  urls: string[],
  shard: ShardAdvert,
  node: () => ShardNode | undefined,
  events: MembershipEvents = {},
): Promise<Membership> {
  const register = () => tracker.register(urls, shard);
  const reg = await register();
  const routeKey = await importPublicRouteKey(reg.routePublicKey);
  const every = Math.max(200, Math.round(reg.leaseMs / 3));
  let admission = "pending";
  let stopped = false;
  // one beat at a time: a late beat arriving after a newer one would report stale sessions
  let beating = false;
  // the engine answers info() between batches: a long batch (a slow engine's prefill) must not
  // hold the heartbeat past its lease, so a beat waits a little, then goes with what it knew
  let known: Awaited<ReturnType<ShardNode["info"]>> | undefined;
  const beat = async () => {
    if (stopped || beating) return;
    beating = true;
    try {
      const n = node();
      const asked = n?.info().then((i) => (known = i));
      asked?.catch(() => {});
      let waited: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([asked, new Promise((r) => (waited = setTimeout(r, Math.min(1_000, every / 2))))]);
      clearTimeout(waited);
      const info = known;
      const r = await tracker.heartbeat({
        sessions: info?.sessions ?? 0,
        // sampled after info(): the freshest list the tracker can get
        sessionIds: n?.sessionIds() ?? [],
        kvCellsUsed: info?.kvCellsUsed ?? 0,
        queued: info?.queued ?? 0,
        decodeTokensPerS: info?.soloTokensPerS ?? 0,
        // a late answer still renews the lease: wait for it as long as a lease
      }, reg.leaseMs);
      if (!r.known) await register();
      admission = r.admission || "pending";
      events.onAdmission?.(admission);
      if (r.place) events.onPlace?.({ start: r.place.start, end: r.place.end });
    } catch (e) {
      events.onBeatFailed?.(e);
    } finally {
      beating = false;
    }
  };
  const timer = setInterval(() => void beat(), every);
  void beat();
  return {
    routeKey,
    get admission() {
      return admission;
    },
    stop: async ({ leave = false } = {}) => {
      stopped = true;
      clearInterval(timer);
      if (leave) await tracker.leave().catch(() => {});
      tracker.close();
    },
  };
}
