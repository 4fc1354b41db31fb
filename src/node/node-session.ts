// One Route Session as a shard node holds it: its epoch, where its cache stands, the
// replies it may have to give again, and its stream to the next shard.
import type { Open, SeamFrame, Tensor } from "../gen/strata/seam/v1/seam_pb.ts";
import type { SessionGrammar } from "../sampling/session-grammar.ts";
import type { SeamLink, SeamTransport } from "../seam/link.ts";

/** Replies kept per session for duplicate step ids. */
const REMEMBERED = 32;

/** Hidden states this shard sent on for some positions, as the next shard received them. */
export interface Sent {
  readonly start: number;
  readonly rows: number;
  readonly tensor: Tensor;
}

export class NodeSession {
  /** the position the next frame must start at (tokens this shard holds or has queued) */
  nextPos = 0;
  /** highest step id taken; lower or equal ids are duplicates */
  lastStep = 0n;
  /** released, cancelled or failed: late results are dropped */
  closed = false;
  /** a release or cancel is travelling down the route */
  ending = false;
  downstream?: SeamLink;
  readonly #replies = new Map<bigint, SeamFrame>();
  /** what encoding the last frame this node sent for the session took (telemetry's codec time) */
  lastEncodeMs = 0;
  /**
   * What went to the next shard, position by position from sentFrom: it rebuilds a shard that
   * replaces the next one. Undefined once incomplete (the node's history budget ran out).
   */
  sent: Sent[] | undefined = [];
  sentBytes = 0;
  /** set when the route broke around the session: its KV waits for a repair until then */
  parkedUntil = 0;
  /** rebuild frames this shard sent down, waiting for their replies */
  readonly rebuilds = new Map<bigint, { resolve: (f: SeamFrame) => void; reject: (e: unknown) => void }>();
  rebuildStep = 0n;
  /** a penalized session's tokens by the position the last shard sampled them at */
  readonly sampledAt = new Map<number, number>();
  /** the last shard's constraint on what the session samples (Sampling.grammar) */
  grammar?: SessionGrammar;
  /** the lineage its prefix entries are keyed by, where this shard reuses prefixes */
  prefixLineage?: string;
  /** positions taken from a prefix entry, until the first step says where the route goes on */
  reused = 0;
  /** positions it took from a prefix entry when it opened (a resuming OPEN reports them) */
  fromEntry = 0;
  /** where `sent` begins: positions before it came from a prefix entry, not through this shard */
  sentFrom = 0;
  /** when it was opened: a session that never takes a step is let go (ShardNodeOptions.unusedMs) */
  readonly openedAt = Date.now();

  constructor(
    readonly id: string,
    readonly epoch: bigint,
    readonly workId: string,
    readonly open: Open,
    readonly reply: (f: SeamFrame) => void,
    /** the recipe the previous shard stamped on OPEN (empty from a driver): its steps must match */
    readonly upstreamRecipe: Uint8Array,
    /** what carries the stream the session arrived on */
    readonly upstreamTransport: SeamTransport,
  ) {}

  get identity() {
    return { sessionId: this.id, routeEpoch: this.epoch, workId: this.workId };
  }

  /**
   * Sends a reply up the route, or on `via` (the owner's reply link), and keeps it for a
   * duplicate of its step.
   */
  answer(f: SeamFrame, via = this.reply): void {
    if (f.stepId > 0n && !f.status && !f.rebuild) {
      this.#replies.set(f.stepId, f);
      if (this.#replies.size > REMEMBERED) this.#replies.delete(this.#replies.keys().next().value!);
    }
    via(f);
  }

  remembered(stepId: bigint): SeamFrame | undefined {
    return this.#replies.get(stepId);
  }
}
