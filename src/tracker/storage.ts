// What the tracker keeps across restarts, behind a port: the route key (so tickets already
// out stay valid) and every registration with its admission verdict. Leases are not kept:
// they are re-learned from heartbeats.
import type { Admission } from "./admission.ts";
import type { PlaceRequest } from "../gen/strata/tracker/v1/tracker_pb.ts";
import type { Span } from "./decode-work.ts";

/** One node's line of the plan in force, as replicas share it: its range (undefined: nothing
 *  useful fits it), and the time of the ask the plan had seen when it placed the node. */
export interface PlanEntry {
  readonly node: string;
  readonly range: Span | undefined;
  readonly askedAt: number;
}

export interface NodeRecord {
  readonly node: string;
  readonly urls: readonly string[];
  /** the artifact's sha256, hex */
  readonly artifact: string;
  readonly start: number;
  readonly end: number;
  readonly engine: string;
  readonly kvCells: number;
  /** the most cells one session may hold there */
  readonly sessionCells: number;
  readonly maxSessions: number;
  readonly tokensPerS: number;
  /** where it serves its range's bytes of the artifact ("" = it does not) */
  readonly artifactUrl: string;
  /** the memory cap it advertised (0: none) */
  readonly memoryCapBytes: number;
  readonly admission: Admission;
}

/** A node's heartbeat, as replicas share them. */
export interface Beat {
  readonly node: string;
  /** when the beat came (the receiving tracker's clock) */
  readonly at: number;
  readonly sessions: number;
  readonly sessionIds: readonly string[];
}

export interface TrackerStorage {
  meta(key: string): string | undefined;
  setMeta(key: string, value: string): void;
  saveNode(rec: NodeRecord): void;
  deleteNode(node: string): void;
  /** every saved registration, by node name */
  nodes(): NodeRecord[];
  /** a heartbeat, for storage that shares leases between tracker replicas */
  saveBeat?(beat: Beat): void;
  /** a node's ask for a range, and the leader's plan, for storage shared by replicas */
  saveAsk?(req: PlaceRequest, at: number): void;
  savePlan?(entries: readonly PlanEntry[]): void;
}

/** Storage that forgets on exit: tests, and a tracker that need not survive restarts. */
export class MemoryStorage implements TrackerStorage {
  readonly #meta = new Map<string, string>();
  readonly #nodes = new Map<string, NodeRecord>();
  meta(key: string): string | undefined {
    return this.#meta.get(key);
  }
  setMeta(key: string, value: string): void {
    this.#meta.set(key, value);
  }
  saveNode(rec: NodeRecord): void {
    this.#nodes.set(rec.node, rec);
  }
  deleteNode(node: string): void {
    this.#nodes.delete(node);
  }
  nodes(): NodeRecord[] {
    return [...this.#nodes.values()].sort((a, b) => a.node < b.node ? -1 : a.node > b.node ? 1 : 0);
  }
}
