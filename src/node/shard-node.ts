// A shard node: one layer range of one Model Artifact, serving its seams. Each incoming
// stream carries one Route Session; the node checks the session's ticket, holds its KV
// through the batcher, forwards its activations to the next shard and passes the replies
// back. Runtime-agnostic: a Deno server and a browser tab run the same class. Its parts:
// frame-checks.ts (what a frame must be), session-table.ts (its sessions, parked, adopted,
// expired), session-steps.ts (steps and sampling), reply-pump.ts (replies from the next shard),
// rebuild-history.ts and rebuild.ts (what it sent on, to rebuild a next shard), owner-links.ts,
// node-snapshots.ts (KV snapshots, kv-snapshot.ts) and node-info.ts.
import { create } from "@bufbuild/protobuf";
import {
  type Hop,
  type NodeInfo,
  OpenSchema,
  Phase,
  type SeamFrame,
  SeamFrameSchema,
} from "../gen/strata/seam/v1/seam_pb.ts";
import type { RangeEngine } from "../engine/range-engine.ts";
import { engineLabel } from "../engine/recipe.ts";
import { nextLineage } from "../route/prefix-keys.ts";
import { Batcher, type BatcherLimits } from "../scheduler/batcher.ts";
import { SeamError } from "../seam/errors.ts";
import type { SeamDialer, SeamServe, SeamTransport } from "../seam/link.ts";
import {
  type Addressee,
  checkAddressed,
  checkOnStream,
  checkRecipe,
  checkReplyLink,
  checkRoute,
  checkSessionPhase,
  checkTicket,
} from "./frame-checks.ts";
import { carriesState, type SnapshotIntake } from "./kv-snapshot.ts";
import { NodeSnapshots } from "./node-snapshots.ts";
import { newCounters, nodeInfo } from "./node-info.ts";
import { NodeSession } from "./node-session.ts";
import { type OwnerLink, OwnerLinks } from "./owner-links.ts";
import { prefixKeyOf, reusesPrefixes } from "./prefix-reuse.ts";
import type { RebuildSender } from "./rebuild.ts";
import { RebuildHistory } from "./rebuild-history.ts";
import { pumpReplies } from "./reply-pump.ts";
import { errorText, refusal, replyTo, sessionFailure, tensorBytes } from "./replies.ts";
import { openGrammar } from "./session-sampling.ts";
import { SessionSteps } from "./session-steps.ts";
import { expiryPeriodMs, SessionTable, type SessionTimes } from "./session-table.ts";

/** A node's identity, links and limits; its sessions' times (lease, unused, park) are SessionTimes. */
export interface ShardNodeOptions extends SessionTimes {
  readonly nodeId: string;
  readonly artifactSha256: Uint8Array;
  /** the public key route tickets must be signed with (a promise while a tracker hands it over) */
  readonly routeKey: CryptoKey | Promise<CryptoKey>;
  readonly dial: SeamDialer;
  readonly limits: BatcherLimits;
  /** hidden states kept for rebuilding a next shard, all sessions together (default 256 MiB) */
  readonly historyBytes?: number;
}

/**
 * A stream that broke because its peer went away (a relay says "unavailable": the peer left),
 * not because of what came over it: frames that failed our checks (other SeamErrors) or the
 * transport's size limit (resource_exhausted, gRPC code 8; invalid_argument, 3) end the session
 * at once.
 */
function peerGone(e: unknown): boolean {
  if (e instanceof SeamError) return e.code === "unavailable";
  const code = (e as { code?: unknown })?.code;
  return !(code === "resource_exhausted" || code === "invalid_argument" || code === 8 || code === 3);
}

export class ShardNode {
  readonly #batcher: Batcher;
  readonly #table: SessionTable;
  readonly #steps: SessionSteps;
  readonly #snapshots: NodeSnapshots;
  /** reply links by session id: the last shard's step replies go straight to the owner */
  readonly #owners = new OwnerLinks();
  readonly #counters = newCounters();
  readonly #leaseTimer: ReturnType<typeof setInterval>;
  #reusing?: Promise<boolean>;

  constructor(readonly engine: RangeEngine, readonly options: ShardNodeOptions) {
    // a step's logits are sampled as its batch is handed out, or copied (session-steps.ts)
    this.#batcher = new Batcher(engine, { ...options.limits, reuseLogits: true });
    this.#table = new SessionTable(this.#batcher, new RebuildHistory(options.historyBytes), options);
    this.#steps = new SessionSteps(
      engine,
      this.#batcher,
      options.nodeId,
      this.#table,
      this.#owners,
      this.#counters,
    );
    this.#snapshots = new NodeSnapshots({
      nodeId: options.nodeId,
      artifact: options.artifactSha256,
      dial: options.dial,
      engine,
      batcher: this.#batcher,
      table: this.#table,
      counters: this.#counters,
      reuses: () => this.#reuses(),
      checkTicket: (f) => this.#checkTicket(f),
    });
    this.#leaseTimer = setInterval(() => void this.#table.expire(), expiryPeriodMs(options));
  }

  /** Whether this shard keeps and reuses prefixes: asked for (limits.prefix) and exact here. */
  #reuses(): Promise<boolean> {
    this.#reusing ??= this.options.limits.prefix
      ? this.engine.memory().then((m) => reusesPrefixes(engineLabel(this.engine), m), () => false)
      : Promise.resolve(false);
    return this.#reusing;
  }

  get #last(): boolean {
    return this.engine.output === "logits";
  }

  /** What frames must be addressed to, and tickets name. */
  get #here(): Addressee {
    return { artifact: this.options.artifactSha256, range: this.engine.facts.range };
  }

  /** What this shard stamps on the rebuild frames it sends a next shard. */
  get #rebuildSender(): RebuildSender {
    return {
      artifact: this.options.artifactSha256,
      recipe: this.engine.recipe,
      nEmbd: this.engine.facts.seamWidth,
    };
  }

  /** Serves one seam stream (one Route Session) until the peer ends it or goes away. */
  readonly serve: SeamServe = async (frames, reply, transport = "memory") => {
    let session: NodeSession | undefined;
    let owner: OwnerLink | undefined;
    let intake: SnapshotIntake | undefined;
    let why = "the previous shard ended the stream without a release";
    // its peer went away (a repair may resume the session) rather than ended it or sent garbage
    let gone = false;
    try {
      for await (const f of frames) {
        this.#counters.bytesIn += tensorBytes(f);
        try {
          if (f.phase === Phase.OPEN && f.open?.replyLink && !session && !owner) {
            owner = await this.#attachOwner(f, reply, transport);
          } else if (f.phase === Phase.SNAPSHOT && !session && !owner) {
            await this.#snapshots.serve(f, reply, () => intake ??= this.#snapshots.intake());
          } else session = await this.#accept(f, session, reply, transport);
        } catch (e) {
          this.#counters.refused++;
          if (f.phase === Phase.SNAPSHOT && carriesState(f)) this.#counters.snapshotsRefused++;
          reply(refusal(f, e));
        }
      }
    } catch (e) {
      // the stream itself failed (a frame past the size limit, bytes that are no frame, a
      // peer gone): say so on the way out, in case the peer is still there to hear it
      why = `the stream failed: ${errorText(e)}`;
      gone = peerGone(e);
      reply(
        sessionFailure(
          session?.identity ?? { sessionId: "", routeEpoch: 0n, workId: "" },
          "stream_failed",
          why,
        ),
      );
    } finally {
      if (owner) this.#owners.detach(owner);
      // the previous shard or the driver is gone: a repair may resume the session here
      if (session && !session.closed && !session.ending) {
        if (gone) await this.#table.park(session, why);
        else await this.#table.drop(session, why);
      }
    }
  };

  /** The ids of the sessions open here: heartbeats list them, so the tracker's load is exact. */
  sessionIds(): string[] {
    return this.#table.ids();
  }

  info(): Promise<NodeInfo> {
    return nodeInfo(this.engine, this.#batcher, this.options, this.#counters);
  }

  async close(): Promise<void> {
    clearInterval(this.#leaseTimer);
    for (const s of this.#table.all()) {
      s.reply(sessionFailure(s.identity, "unavailable", `node ${this.options.nodeId} is shutting down`));
      await this.#table.drop(s, "node shutting down");
    }
  }

  /** Prefix entries held now (a draining node with none has nothing to hand over). */
  get prefixEntries(): number {
    return this.#batcher.stats().prefix?.entries ?? 0;
  }

  /**
   * A draining node's prefix entries go to `to`, a node of the same range that stays (the tracker
   * ticketed it for this work): the prompts that would have found them here find them there.
   * Resolves with the entries it took; one it refuses is left (this node's go with it). Entries
   * not sent by `until` (Date.now()) are left too: a node that goes does not wait long.
   */
  handOver(to: Hop, until = Infinity): Promise<number> {
    return this.#snapshots.handOver(to, until);
  }

  async #accept(
    f: SeamFrame,
    session: NodeSession | undefined,
    reply: (f: SeamFrame) => void,
    transport: SeamTransport,
  ) {
    checkAddressed(f, this.#here);
    checkSessionPhase(f);
    if (f.phase === Phase.OPEN) return await this.#open(f, session, reply, transport);
    if (!session && f.phase === Phase.CANCEL && f.open) return await this.#cancelParked(f, reply);
    checkOnStream(f, session);
    if (f.phase === Phase.PREFILL || f.phase === Phase.DECODE) {
      checkRecipe(f, session);
      this.#steps.take(session, f);
    } else await this.#end(session, f);
    return session;
  }

  async #open(
    f: SeamFrame,
    current: NodeSession | undefined,
    reply: (f: SeamFrame) => void,
    transport: SeamTransport,
  ) {
    if (current && !current.closed) {
      throw new SeamError("malformed", `this stream already carries session ${current.id}`);
    }
    const open = f.open!;
    const range = this.engine.facts.range;
    await this.#checkTicket(f);
    checkRoute(open, range, this.#last);
    const next = open.nextHops[0];
    const existing = this.#table.checkEpoch(f);
    const s = new NodeSession(
      f.sessionId,
      f.routeEpoch,
      f.workId,
      open,
      reply,
      f.recipeFingerprint,
      transport,
    );
    if (!next && open.sampling?.grammar) {
      // made now: a grammar (or history) the engine refuses fails the open, before any step
      await openGrammar(s, open, this.engine);
    }
    if (existing && open.resume && await this.#table.adopt(existing, s, f.cacheExpect)) {
      this.#batcher.reroute(f.sessionId, open.routeShards);
    } else {
      if (existing) {
        // a newer epoch supersedes the old route of the same session
        existing.reply(
          sessionFailure(existing.identity, "wrong_epoch", `re-opened at epoch ${f.routeEpoch}`),
        );
        await this.#table.drop(existing, "superseded");
      }
      const prefix = open.prefix && await this.#reuses()
        ? prefixKeyOf(open.prefix, open.prefix.lineage)
        : undefined;
      s.nextPos = this.#batcher.open(f.sessionId, open.kvCells, { shards: open.routeShards, prefix });
      s.prefixLineage = prefix?.lineage;
      if (s.nextPos > 0) {
        // this session did not send its reused positions on: a repair rebuilds a next shard
        // only from where it began to
        s.sentFrom = s.reused = s.fromEntry = s.nextPos;
      }
    }
    this.#table.add(s);
    this.#counters.served++;
    if (!next) {
      s.answer(
        replyTo(f, {
          cacheResult: s.nextPos,
          hopPositions: open.resume || open.prefix ? [s.nextPos] : [],
          hopReused: open.resume ? [s.fromEntry] : [],
        }),
      );
      return s;
    }
    try {
      s.downstream = this.options.dial(next.url);
    } catch (e) {
      await this.#table.drop(s, "no next shard");
      throw new SeamError("unavailable", `cannot reach ${next.url}: ${errorText(e)}`);
    }
    s.downstream.send(create(SeamFrameSchema, {
      ...f,
      range: next.range,
      recipeFingerprint: this.engine.recipe,
      open: create(OpenSchema, {
        ...open,
        routeTicket: next.routeTicket,
        nextHops: open.nextHops.slice(1),
        // the next shard's input comes through this one
        prefix: open.prefix &&
          { ...open.prefix, lineage: await nextLineage(open.prefix.lineage, this.engine.recipe, range) },
      }),
    }));
    void pumpReplies(s, next.url, this.#table, this.#rebuildSender);
    return s;
  }

  /**
   * The session's owner opened its own stream to this, the last shard: step replies go there
   * straight (one crossing) instead of back up the route. The stream carries nothing else.
   */
  async #attachOwner(
    f: SeamFrame,
    reply: (f: SeamFrame) => void,
    transport: SeamTransport,
  ): Promise<OwnerLink> {
    checkReplyLink(f, this.#last);
    await this.#checkTicket(f);
    const owner = this.#owners.attach(f, reply, transport);
    reply(replyTo(f, { cacheResult: 0 }));
    return owner;
  }

  /** OPEN, a reply link or a parked session's cancel: a ticket for the frame's session, epoch and this range. */
  #checkTicket(f: SeamFrame): Promise<void> {
    return checkTicket(f, this.options.routeKey, this.#here);
  }

  /** Release or cancel: frees this shard's KV at once, then passes the frame down the route. */
  async #end(s: NodeSession, f: SeamFrame): Promise<void> {
    if (s.ending) return;
    s.ending = true;
    this.#table.history.forget(s);
    this.#table.retire(s, f.phase === Phase.RELEASE);
    if (f.phase === Phase.RELEASE && f.keep && s.prefixLineage !== undefined) {
      const key = { ...prefixKeyOf(f.keep, new Uint8Array(0)), lineage: s.prefixLineage };
      await this.#batcher.keep(s.id, key).catch(() => {});
    } else {
      await this.#batcher.release(s.id, f.phase === Phase.CANCEL ? "cancelled" : "released").catch(() => {});
    }
    if (!s.downstream) {
      s.closed = true;
      s.answer(replyTo(f, { cacheResult: 0 }));
      return;
    }
    s.downstream.send(
      create(SeamFrameSchema, {
        ...f,
        range: s.open.nextHops[0].range,
        recipeFingerprint: this.engine.recipe,
      }),
    );
  }

  /** A driver frees a session it can no longer reach through its route (parked here). */
  async #cancelParked(f: SeamFrame, reply: (f: SeamFrame) => void): Promise<undefined> {
    await this.#checkTicket(f);
    const s = this.#table.get(f.sessionId);
    if (s && s.epoch === f.routeEpoch) await this.#table.drop(s, "cancelled by its driver");
    reply(replyTo(f, { cacheResult: 0 }));
    return undefined;
  }
}
