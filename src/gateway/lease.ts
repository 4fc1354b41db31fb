// What the gateway holds for one session: a route the tracker handed out, until it ends.
import type { Route } from "../gen/strata/tracker/v1/tracker_pb.ts";

/** A route held for one session until `end()`. */
export interface RouteLease {
  readonly sessionId: string;
  readonly route: Route;
  /** the session is over (released, cancelled, failed or never opened) */
  end(): Promise<void>;
}

/**
 * A route for a session whose route broke: its own id (nodes that still hold the session know
 * it by it), without the lost nodes, keeping the others where it can.
 */
export interface RepairAsk {
  readonly sessionId?: string;
  readonly avoid?: readonly string[];
  /**
   * the range ("start:end") each avoided node held when it was lost: one the tracker lists live
   * at another range since (it moved and reloaded) is not avoided any more
   */
  readonly lostAt?: ReadonlyMap<string, string>;
  readonly keep?: readonly string[];
  /** the route epoch the session had: the new one is above it */
  readonly afterEpoch?: bigint;
  /** standby nodes that took KV snapshots of the session: the new route goes through them first */
  readonly prefer?: readonly string[];
}
