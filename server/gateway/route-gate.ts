// Routes for the gateway's sessions, through the request queue: the tracker's "busy" makes a
// request wait its turn instead of failing. A lease ends exactly once: the tracker drops the
// route's claims at once and the next waiter tries.
import { Code, ConnectError } from "@connectrpc/connect";
import {
  BUSY,
  ClientLeft,
  NOT_YET,
  QueueRefused,
  RequestQueue,
  type RequestQueueOptions,
} from "../../src/gateway/request-queue.ts";
import type { Route } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import type { RepairAsk, RouteLease } from "../../src/gateway/lease.ts";
import { sessionEnds, type trackerClient } from "../../node-apis/tracker/client.ts";
import { log } from "../log/log.ts";

/**
 * How long a request waits while the tracker has no complete route at all: a node that moves to
 * another range on a fixed port leaves its old range before the new one loads, a few seconds.
 */
export const COVERAGE_WAIT_MS = 10_000;

export class RouteGate {
  readonly queue: RequestQueue<Route>;
  /** ends go to the tracker in batches while a `Done` is in flight */
  readonly #ends: ReturnType<typeof sessionEnds>;

  constructor(
    readonly tracker: ReturnType<typeof trackerClient>["client"],
    readonly artifact: Uint8Array,
    options: RequestQueueOptions,
  ) {
    this.queue = new RequestQueue(options);
    this.#ends = sessionEnds(tracker);
  }

  /**
   * A route for a new session, waiting in `key`'s line while every route is busy (through the
   * `prefer` nodes where one has room). Throws
   * `QueueRefused` past the bound or the deadline, `ClientLeft` when `signal` aborts first,
   * or the tracker's error (no route at all).
   */
  async acquire(
    key: string,
    signal: AbortSignal,
    repair?: RepairAsk,
    /** nodes that hold the prompt's prefix: a route through them first, where it has room */
    prefer: readonly string[] = [],
    /** how long no complete route at all (or no tracker) is waited out before it is the answer */
    coverageWaitMs = COVERAGE_WAIT_MS,
  ): Promise<RouteLease> {
    // a repair keeps its session's id: nodes that still hold the session know it by it
    const sessionId = repair?.sessionId ?? crypto.randomUUID();
    const since = performance.now();
    const attempt = async () => {
      const avoid = repair ? await this.#stillLost(repair) : [];
      try {
        const { routes } = await this.tracker.route(
          {
            artifactSha256: this.artifact,
            sessionId,
            count: 1,
            avoidNodes: avoid,
            keepNodes: [...repair?.keep ?? []],
            preferNodes: [...prefer, ...repair?.prefer ?? []],
            afterEpoch: repair?.afterEpoch ?? 0n,
          },
          { timeoutMs: 10_000 },
        );
        return routes[0];
      } catch (e) {
        if (e instanceof ConnectError && e.code === Code.ResourceExhausted) return BUSY;
        // no complete route now (a range between two nodes) or no tracker (restarting): the
        // request waits its turn a while, as for a busy one, then hears why; a repair that
        // avoids nodes it lost lets the requests behind it try meanwhile (theirs may exist)
        if (
          e instanceof ConnectError && e.code === Code.Unavailable &&
          performance.now() - since < coverageWaitMs
        ) return avoid.length ? NOT_YET : BUSY;
        throw e;
      }
    };
    let route: Route;
    try {
      route = await this.queue.admit(key, attempt, signal);
    } catch (e) {
      // a route call that failed on the way (a timeout) may have claimed all the same
      if (!(e instanceof QueueRefused || e instanceof ClientLeft)) void this.#done(sessionId);
      throw e;
    }
    let ended: Promise<void> | undefined;
    const lease = { sessionId, route, end: () => ended ??= this.#done(sessionId) };
    if (signal.aborted) {
      // the route came as the client left
      await lease.end();
      throw new ClientLeft();
    }
    return lease;
  }

  /**
   * The nodes a repair still avoids: those it lost, but any the tracker now lists live and
   * admitted at another range than the one it held (it moved and reloaded: a rebalance, or a
   * hole it filled). Without a word from the tracker, all of them.
   */
  async #stillLost(repair: RepairAsk): Promise<string[]> {
    const avoid = [...repair.avoid ?? []];
    const lostAt = repair.lostAt;
    if (!lostAt?.size || avoid.length === 0) return avoid;
    const r = await this.tracker.nodes({ nodes: avoid }, { timeoutMs: 5000 }).catch(() => undefined);
    const moved = new Set(
      (r?.nodes ?? []).filter((n) => {
        const range = n.shard?.range;
        const was = lostAt.get(n.node);
        return n.live && n.admission === "admitted" && range && was !== undefined &&
          `${range.start}:${range.end}` !== was;
      }).map((n) => n.node),
    );
    return avoid.filter((n) => !moved.has(n));
  }

  /**
   * A route for side work beside a session (`work` names it in the tickets), through none of
   * `other` and only if one is free now: a standby that takes the session's KV snapshots. End
   * it when the work is done.
   */
  async standby(work: string, other: readonly string[]): Promise<RouteLease | undefined> {
    try {
      const { routes } = await this.tracker.route(
        { artifactSha256: this.artifact, sessionId: work, count: 1, otherThan: [...other] },
        { timeoutMs: 10_000 },
      );
      if (!routes[0]) return undefined;
      let ended: Promise<void> | undefined;
      return { sessionId: work, route: routes[0], end: () => ended ??= this.#done(work) };
    } catch (e) {
      // busy or no route: nothing is mirrored this time (a claim made on the way lapses)
      if (!(e instanceof ConnectError)) throw e;
      void this.#done(work);
      return undefined;
    }
  }

  /** Tells the tracker (so its count is exact at once), then lets the next waiter try. */
  async #done(sessionId: string): Promise<void> {
    try {
      await this.#ends.end(sessionId);
    } catch (e) {
      // the tracker drops the claim by itself: the nodes stop reporting the session, or it times out
      log.warn("done not delivered to the tracker", { error: e instanceof Error ? e.message : String(e) });
    }
    this.queue.wake();
  }
}
