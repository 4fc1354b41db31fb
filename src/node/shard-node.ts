// A shard node: one layer range of one Model Artifact, serving its seams. Each incoming
// stream carries one Route Session; the node checks the session's ticket, holds its KV
// through the batcher, forwards its activations to the next shard and passes the replies
// back. Runtime-agnostic: a Deno server and a browser tab run the same class.
import { create } from "@bufbuild/protobuf";
import {
  ElementType,
  type Hop,
  type NodeInfo,
  NodeInfoSchema,
  type NodeTelemetry,
  NodeTelemetrySchema,
  OpenSchema,
  Phase,
  PrefixBlocksSchema,
  type Sampled,
  SampledSchema,
  type SeamFrame,
  SeamFrameSchema,
  type Tensor,
} from "../gen/strata/seam/v1/seam_pb.ts";
import { bytesToHex, hexToBytes } from "../bytes/hex.ts";
import type { RangeEngine } from "../engine/range-engine.ts";
import { engineLabel } from "../engine/recipe.ts";
import { verifyTicket } from "../route/ticket.ts";
import { adjusted, chooseAdjusted } from "../sampling/sampler.ts";
import { SessionGrammar } from "../sampling/session-grammar.ts";

/** the most alternatives a step's logprobs name (OpenAI's top_logprobs bound) */
const MAX_TOP_LOGPROBS = 20;
import { Batcher, type BatcherLimits, type Step, type StepResult } from "../scheduler/batcher.ts";
import { SeamError } from "../seam/errors.ts";
import { checkFrame } from "../seam/frame.ts";
import type { SeamDialer, SeamServe, SeamTransport } from "../seam/link.ts";
import { codecMs } from "../seam/codec-time.ts";
import { unixMs } from "../seam/clock.ts";
import { packTensor, unpackTensor } from "../seam/tensor.ts";
import { NodeSession } from "./node-session.ts";
import { prefixKeyOf, reusesPrefixes } from "./prefix-reuse.ts";
import { nextLineage } from "../route/prefix-keys.ts";
import { rebuildChunks } from "./rebuild.ts";
import {
  carriesState,
  pushSnapshot,
  sendSnapshot,
  SnapshotIntake,
  type SnapshotNode,
} from "./kv-snapshot.ts";
import { PREFILL_CHUNK_TOKENS, SCHEMA_VERSION } from "../seam/limits.ts";
import { errorCode, errorText, refusal, replyTo, sessionFailure, tensorBytes } from "./replies.ts";

export interface ShardNodeOptions {
  readonly nodeId: string;
  readonly artifactSha256: Uint8Array;
  /** the public key route tickets must be signed with (a promise while a tracker hands it over) */
  readonly routeKey: CryptoKey | Promise<CryptoKey>;
  readonly dial: SeamDialer;
  readonly limits: BatcherLimits;
  /** a session with no step for this long is released */
  readonly leaseMs: number;
  /** a session opened that has taken no step this long is released (default 120 s): a peer
   *  holding tickets cannot keep slots it never uses for a whole lease */
  readonly unusedMs?: number;
  /** a session whose route broke keeps its KV this long for a repair (default 10 s; 0: freed at once) */
  readonly parkMs?: number;
  /** hidden states kept for rebuilding a next shard, all sessions together (default 256 MiB) */
  readonly historyBytes?: number;
}

const PARK_MS = 10_000;
const UNUSED_MS = 120_000;
/** What a session's own stream carries (a SNAPSHOT travels on a stream of its own). */
const SESSION_PHASES: ReadonlySet<Phase> = new Set([
  Phase.OPEN,
  Phase.PREFILL,
  Phase.DECODE,
  Phase.RELEASE,
  Phase.CANCEL,
]);

/** ended sessions remembered against replays: ~100 bytes each */
const ENDED_KEPT = 65_536;
const HISTORY_BYTES = 256 * 2 ** 20;
/** a chat format's generation prompt, which a grammar reads first: a few tokens */
const MAX_GRAMMAR_PREFILL = 4096;

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

/** A route session owner's reply link to this (last) shard. */
interface OwnerLink {
  readonly sessionId: string;
  readonly epoch: bigint;
  readonly send: (f: SeamFrame) => void;
  readonly transport: SeamTransport;
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((v, i) => v === b[i]);
const hex8 = (b: Uint8Array) => b.length ? bytesToHex(b.subarray(0, 4)) : "(none)";

export class ShardNode {
  readonly #batcher: Batcher;
  readonly #sessions = new Map<string, NodeSession>();
  /** reply links by session id: the last shard's step replies go straight to the owner */
  readonly #owners = new Map<string, OwnerLink>();
  readonly #counters = {
    bytesIn: 0,
    bytesOut: 0,
    refused: 0,
    served: 0,
    snapshotsSent: 0,
    snapshotsTaken: 0,
    snapshotsRefused: 0,
  };
  #historyBytes = 0;
  /** sessions released here or let go as idle, with their epoch: an OPEN at that epoch or below
   *  is a replay (a captured frame, a ticket used twice). Sessions that failed or were cancelled
   *  are not kept: a driver may open them again at the same epoch (a resume that could not go
   *  on re-prefills the same route). */
  readonly #ended = new Map<string, bigint>();
  readonly #leaseTimer: ReturnType<typeof setInterval>;
  #reusing?: Promise<boolean>;

  constructor(readonly engine: RangeEngine, readonly options: ShardNodeOptions) {
    // a step's logits are sampled as its batch is handed out, or copied (#stepDone)
    this.#batcher = new Batcher(engine, { ...options.limits, reuseLogits: true });
    this.#leaseTimer = setInterval(
      () => void this.#expire(),
      Math.min(
        60_000,
        Math.max(
          250,
          Math.min(options.leaseMs, options.parkMs ?? PARK_MS, options.unusedMs ?? UNUSED_MS) / 4,
        ),
      ),
    );
  }

  /** Whether this shard keeps and reuses prefixes: asked for (limits.prefix) and exact here. */
  #reuses(): Promise<boolean> {
    this.#reusing ??= this.options.limits.prefix
      ? this.engine.memory().then((m) => reusesPrefixes(engineLabel(this.engine), m), () => false)
      : Promise.resolve(false);
    return this.#reusing;
  }

  get #first(): boolean {
    return this.engine.input === "tokens";
  }

  get #last(): boolean {
    return this.engine.output === "logits";
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
            await this.#snapshot(
              f,
              reply,
              () => intake ??= new SnapshotIntake(this.#snapshots, (t) => this.#checkTicket(t)),
            );
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
      if (owner) this.#detachOwner(owner);
      // the previous shard or the driver is gone: a repair may resume the session here
      if (session && !session.closed && !session.ending) {
        if (gone) await this.#park(session, why);
        else await this.#drop(session, why);
      }
    }
  };

  /** The ids of the sessions open here: heartbeats list them, so the tracker's load is exact. */
  sessionIds(): string[] {
    return [...this.#sessions.keys()];
  }

  async info(): Promise<NodeInfo> {
    const f = this.engine.facts;
    const m = await this.engine.memory();
    const b = this.#batcher.stats();
    return create(NodeInfoSchema, {
      node: this.options.nodeId,
      artifactSha256: this.options.artifactSha256,
      recipeFingerprint: this.engine.recipe,
      range: { start: f.range.start, end: f.range.end },
      nLayer: f.nLayer,
      nEmbd: f.seamWidth,
      nVocab: f.nVocab,
      engine: engineLabel(this.engine),
      kvCells: this.options.limits.kvCells,
      kvCellsUsed: m.kvCellsUsed,
      kvCellsReserved: b.reservedCells,
      sessions: b.sessions,
      maxSessions: m.maxSequences,
      queued: b.queued,
      batches: BigInt(b.batches),
      graphPasses: BigInt(b.graphPasses),
      kvLayout: m.kvLayout,
      weightBytes: BigInt(m.weightBytes),
      kvBytes: BigInt(m.kvBytes),
      computeBytes: BigInt(m.computeBytes),
      engineMs: b.engineMs,
      lastBatchSessions: b.lastBatchSessions,
      maxBatchSessions: b.maxBatchSessions,
      prefillTokens: BigInt(b.prefillTokens),
      decodeTokens: BigInt(b.decodeTokens),
      seamBytesIn: BigInt(this.#counters.bytesIn),
      seamBytesOut: BigInt(this.#counters.bytesOut),
      refusedFrames: BigInt(this.#counters.refused),
      sessionsServed: BigInt(this.#counters.served),
      soloTokensPerS: b.soloTokensPerS,
      prefix: b.prefix && {
        ...b.prefix,
        hits: BigInt(b.prefix.hits),
        misses: BigInt(b.prefix.misses),
        tokensReused: BigInt(b.prefix.tokensReused),
        evictions: BigInt(b.prefix.evictions),
        snapshotsSent: BigInt(this.#counters.snapshotsSent),
        snapshotsTaken: BigInt(this.#counters.snapshotsTaken),
        snapshotsRefused: BigInt(this.#counters.snapshotsRefused),
      },
    });
  }

  async close(): Promise<void> {
    clearInterval(this.#leaseTimer);
    for (const s of [...this.#sessions.values()]) {
      s.reply(sessionFailure(s.identity, "unavailable", `node ${this.options.nodeId} is shutting down`));
      await this.#drop(s, "node shutting down");
    }
  }

  /** A frame that is whole and addressed to this node's range of its artifact. */
  #addressedHere(f: SeamFrame): void {
    checkFrame(f);
    const mine = this.engine.facts.range;
    if (f.range!.start !== mine.start || f.range!.end !== mine.end) {
      throw new SeamError(
        "wrong_shard",
        `frame for layers ${f.range!.start}:${f.range!.end}; this node holds ${mine.start}:${mine.end}`,
      );
    }
    if (!sameBytes(f.artifactSha256, this.options.artifactSha256)) {
      throw new SeamError("wrong_shard", "frame for another model artifact");
    }
  }

  /** What the node lends the KV snapshots it sends and takes (kv-snapshot.ts). */
  #snapshotNode?: SnapshotNode;
  get #snapshots(): SnapshotNode {
    const range = this.engine.facts.range;
    return this.#snapshotNode ??= {
      artifact: this.options.artifactSha256,
      recipe: this.engine.recipe,
      range: { start: range.start, end: range.end },
      dial: (url) => this.options.dial(url),
      exportSession: (id) => this.#batcher.exportSession(id),
      importEntry: (key, state, positions) => this.#batcher.importEntry(key, state, positions),
      maxStateBytes: async (positions) => {
        const m = await this.engine.memory();
        // K and V of every layer here per cell, its position and sequence, and headers
        return Math.ceil((m.kvBytes / Math.max(1, m.kvCells)) * positions * 1.05) + (1 << 20);
      },
    };
  }

  /**
   * A draining node's prefix entries go to `to`, a node of the same range that stays (the tracker
   * ticketed it for this work): the prompts that would have found them here find them there.
   * Resolves with the entries it took; one it refuses is left (this node's go with it). Entries
   * not sent by `until` (Date.now()) are left too: a node that goes does not wait long.
   */
  /** Prefix entries held now (a draining node with none has nothing to hand over). */
  get prefixEntries(): number {
    return this.#batcher.stats().prefix?.entries ?? 0;
  }

  async handOver(to: Hop, until = Infinity): Promise<number> {
    if (!await this.#reuses()) return 0;
    let taken = 0;
    for await (const e of this.#batcher.exportEntries()) {
      if (Date.now() >= until) break;
      const key = create(PrefixBlocksSchema, {
        blockTokens: e.key.blockTokens,
        blocks: e.key.blocks.map(hexToBytes),
        lineage: hexToBytes(e.key.lineage),
      });
      try {
        await pushSnapshot(
          this.#snapshots,
          to,
          key,
          e.cells,
          e.state,
          `${this.options.nodeId}/handover/${taken}`,
          Math.min(60_000, Math.max(1_000, until - Date.now())),
        );
        taken++;
        this.#counters.snapshotsSent++;
      } catch {
        // the receiver's refusal (full, another recipe): the next entry may still fit
      }
    }
    return taken;
  }

  /**
   * A SNAPSHOT frame: a driver asks this shard to send a session's KV to another node of its
   * range, or a peer sends one here, chunk by chunk. Only where prefixes are kept and reused.
   */
  async #snapshot(f: SeamFrame, reply: (f: SeamFrame) => void, intake: () => SnapshotIntake): Promise<void> {
    this.#addressedHere(f);
    if (!await this.#reuses()) throw new SeamError("malformed", "this node keeps no prefix entries");
    if (carriesState(f)) {
      // llama.cpp's state reader refuses a malformed state by throwing: the WASM build has no
      // exceptions, so there it would abort the engine instead
      if (this.engine.kind !== "native") {
        throw new SeamError("malformed", "a WASM engine takes no KV snapshots");
      }
      const done = await intake().take(f);
      if (done) {
        this.#counters.snapshotsTaken++;
        reply(done);
      }
      return;
    }
    await this.#checkTicket(f);
    const s = this.#sessions.get(f.sessionId);
    if (!s || s.closed || s.epoch !== f.routeEpoch) {
      throw new SeamError(
        "unknown_session",
        `session ${f.sessionId} is not open here at epoch ${f.routeEpoch}`,
      );
    }
    const positions = await sendSnapshot(this.#snapshots, {
      id: s.id,
      epoch: s.epoch,
      held: s.nextPos,
      lineage: s.prefixLineage === undefined ? undefined : s.open.prefix?.lineage,
    }, f);
    this.#counters.snapshotsSent++;
    reply(replyTo(f, { cacheResult: positions }));
  }

  async #accept(
    f: SeamFrame,
    session: NodeSession | undefined,
    reply: (f: SeamFrame) => void,
    transport: SeamTransport,
  ) {
    this.#addressedHere(f);
    if (!SESSION_PHASES.has(f.phase)) {
      throw new SeamError("malformed", `phase ${f.phase} does not travel on a session's stream`);
    }
    if (f.phase === Phase.OPEN) return await this.#open(f, session, reply, transport);
    if (!session && f.phase === Phase.CANCEL && f.open) return await this.#cancelParked(f, reply);
    if (!session || session.closed) {
      throw new SeamError("unknown_session", `session ${f.sessionId} is not open on this stream`);
    }
    if (session.id !== f.sessionId) {
      throw new SeamError("malformed", `this stream carries session ${session.id}, not ${f.sessionId}`);
    }
    if (f.routeEpoch !== session.epoch) {
      throw new SeamError(
        "wrong_epoch",
        `session ${session.id} is at epoch ${session.epoch}, frame at ${f.routeEpoch}`,
      );
    }
    if (session.parkedUntil && f.phase !== Phase.CANCEL && f.phase !== Phase.RELEASE) {
      throw new SeamError("unavailable", `session ${session.id} lost its route here; it waits for a repair`);
    }
    if (f.phase === Phase.PREFILL || f.phase === Phase.DECODE) {
      if (!sameBytes(f.recipeFingerprint, session.upstreamRecipe)) {
        // this shard's KV holds what the opening engine computed: another build's states would not continue it
        throw new SeamError(
          "wrong_recipe",
          `session ${session.id} opened behind engine recipe ${hex8(session.upstreamRecipe)}, frame from ${
            hex8(f.recipeFingerprint)
          }`,
        );
      }
      this.#step(session, f);
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
    const next = open.nextHops[0];
    if (open.probe && next) throw new SeamError("malformed", "a probe goes to one shard only");
    if (this.#last && next) throw new SeamError("malformed", "the route goes on past the last layer");
    if (!this.#last && !next && !open.probe) {
      throw new SeamError("malformed", `the route ends at layer ${range.end}`);
    }
    if (next && next.range?.start !== range.end) {
      throw new SeamError("malformed", `the next hop starts at layer ${next.range?.start}, not ${range.end}`);
    }
    const existing = this.#sessions.get(f.sessionId);
    if (existing && f.routeEpoch <= existing.epoch) {
      throw new SeamError("wrong_epoch", `session ${f.sessionId} is open at epoch ${existing.epoch}`);
    }
    const ended = this.#ended.get(f.sessionId);
    if (ended !== undefined && f.routeEpoch <= ended) {
      throw new SeamError("wrong_epoch", `session ${f.sessionId} ended here at epoch ${ended}`);
    }
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
      const g = open.sampling.grammar;
      if (g.prefill.length > MAX_GRAMMAR_PREFILL) {
        throw new SeamError("too_large", `a grammar prefill of ${g.prefill.length} tokens`);
      }
      const spec = { gbnf: g.gbnf, triggerPatterns: g.triggerPatterns, triggerTokens: g.triggerTokens };
      s.grammar = new SessionGrammar(() => this.engine.grammar(spec), [
        ...g.prefill,
        ...open.sampling.history,
      ]);
      try {
        await s.grammar.ready();
      } catch (e) {
        void s.grammar.close();
        throw new SeamError("malformed", errorText(e));
      }
    }
    if (existing && open.resume && await this.#adopt(existing, s, f.cacheExpect)) {
      this.#batcher.reroute(f.sessionId, open.routeShards);
    } else {
      if (existing) {
        // a newer epoch supersedes the old route of the same session
        existing.reply(
          sessionFailure(existing.identity, "wrong_epoch", `re-opened at epoch ${f.routeEpoch}`),
        );
        await this.#drop(existing, "superseded");
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
    this.#sessions.set(s.id, s);
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
      await this.#drop(s, "no next shard");
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
    void this.#pump(s, next.url);
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
    checkFrame(f);
    if (!this.#last) throw new SeamError("malformed", "only the last shard sends replies to the owner");
    await this.#checkTicket(f);
    const held = this.#owners.get(f.sessionId);
    if (held && held.epoch > f.routeEpoch) {
      throw new SeamError("wrong_epoch", `session ${f.sessionId} is owned at epoch ${held.epoch}`);
    }
    const owner = { sessionId: f.sessionId, epoch: f.routeEpoch, send: reply, transport };
    this.#owners.set(f.sessionId, owner);
    reply(replyTo(f, { cacheResult: 0 }));
    return owner;
  }

  /** A reply link ended: unless a newer one took its place, replies go up the route again. */
  #detachOwner(owner: OwnerLink): void {
    if (this.#owners.get(owner.sessionId) === owner) this.#owners.delete(owner.sessionId);
  }

  /** Where the session's step replies go: its owner's reply link, else back up the route. */
  #ownerOf(s: NodeSession): OwnerLink | undefined {
    const o = this.#owners.get(s.id);
    return o && o.epoch === s.epoch ? o : undefined;
  }

  /** OPEN, a reply link or a parked session's cancel: a ticket for the frame's session, epoch and this range. */
  async #checkTicket(f: SeamFrame): Promise<void> {
    await verifyTicket(await this.options.routeKey, f.open!.routeTicket, {
      sessionId: f.sessionId,
      routeEpoch: f.routeEpoch,
      artifactSha256: this.options.artifactSha256,
      range: this.engine.facts.range,
    });
  }

  /** Takes a prefill chunk or decode step: checks it whole, then queues it for a batch. */
  #step(s: NodeSession, f: SeamFrame): void {
    // taken off its stream this turn: telemetry times the crossing with it
    const arrived = unixMs();
    if (f.stepId === 0n) throw new SeamError("malformed", "a step needs a step id");
    // rebuild frames come from the previous shard, numbered apart from the driver's steps
    if (!f.rebuild && f.stepId <= s.lastStep) {
      // a duplicate never runs twice: answered again if done, otherwise its reply is coming
      const again = s.remembered(f.stepId);
      if (again) s.reply(again);
      return;
    }
    const { start, count } = f.positions!;
    if (s.reused > 0 && !f.rebuild) {
      // the route continues from the smallest prefix its shards held: this one may hold more
      if (start < s.nextPos && start === f.cacheExpect) {
        s.nextPos = s.sentFrom = this.#batcher.cutBack(s.id, start);
        s.fromEntry = Math.min(s.fromEntry, s.nextPos);
      }
      s.reused = 0;
    }
    if (start !== s.nextPos || f.cacheExpect !== s.nextPos) {
      throw new SeamError(
        "bad_position",
        `session ${s.id} continues at ${s.nextPos}; frame at ${start} expecting ${f.cacheExpect}`,
      );
    }
    if (f.phase === Phase.PREFILL && !(f.chunkCount > 0 && f.chunkIndex < f.chunkCount)) {
      throw new SeamError("malformed", `prefill chunk ${f.chunkIndex} of ${f.chunkCount}`);
    }
    if (f.tensors.length !== 1) {
      throw new SeamError("bad_tensor", `${f.tensors.length} tensors; a step carries one`);
    }
    if (f.rebuild && f.phase !== Phase.PREFILL) {
      throw new SeamError("malformed", "a rebuild frame is a prefill");
    }
    const wantLogits = this.#last && !f.rebuild &&
      (f.phase === Phase.DECODE || f.chunkIndex === f.chunkCount - 1);
    const step: Step = this.#first ? { tokens: this.#tokens(f, count), wantLogits } : {
      hidden: unpackTensor(f.tensors[0], {
        name: "hidden_states",
        elementType: ElementType.F32,
        cols: this.engine.facts.seamWidth,
        rows: count,
      }).values as Float32Array,
      wantLogits,
    };
    this.#batcher.check(s.id, step);
    s.nextPos += count;
    if (!f.rebuild) s.lastStep = f.stepId;
    this.#batcher.submit(s.id, step).then(
      (r) => this.#stepDone(s, f, r, arrived),
      (e) => this.#stepFailed(s, f, e),
    );
  }

  #tokens(f: SeamFrame, count: number): Int32Array {
    const ids = unpackTensor(f.tensors[0], { name: "token_ids", elementType: ElementType.I32, cols: count })
      .values as Int32Array;
    const nVocab = this.engine.facts.nVocab;
    const bad = ids.findIndex((t) => t < 0 || t >= nVocab);
    if (bad >= 0) {
      throw new SeamError("bad_tensor", `token id ${ids[bad]} outside the vocabulary (${nVocab})`);
    }
    return ids;
  }

  #stepDone(s: NodeSession, f: SeamFrame, r: StepResult, arrived: number): void {
    if (s.closed) return;
    const range = this.engine.facts.range;
    const telemetry = create(NodeTelemetrySchema, {
      node: this.options.nodeId,
      range: { start: range.start, end: range.end },
      queueMs: r.queuedMs,
      computeMs: r.computeMs,
      batchSessions: r.batchSessions,
      batchTokens: r.batchTokens,
      batchPasses: r.batchPasses,
      bytesIn: tensorBytes(f),
      // this step's frame in, and the last frame out (this one's is known once it is encoded)
      codecMs: codecMs(f) + s.lastEncodeMs,
      receivedUnixMs: arrived,
    });
    if (s.open.probe) {
      // an admission probe: the output itself goes back, for the tracker to check
      // (a copy: a step's logits are the batcher's to reuse once it has moved on)
      const out = packTensor(this.#last ? "logits" : "hidden_states", r.data.slice(), [r.rows, r.dim]);
      s.answer(
        replyTo(f, {
          cacheResult: f.positions!.start + f.positions!.count,
          telemetry: [telemetry],
          tensors: [out],
        }),
      );
      return;
    }
    if (!this.#last) {
      const hop = s.open.nextHops[0];
      // the step goes on with every node's telemetry so far: the last shard's reply carries it all
      const out = create(SeamFrameSchema, {
        ...f,
        range: hop.range,
        recipeFingerprint: this.engine.recipe,
        tensors: [packTensor("hidden_states", r.data, [r.rows, r.dim], s.open.seamCompression || undefined)],
        telemetry: [...f.telemetry, telemetry],
        crossings: f.crossings + 1,
      });
      this.#keepSent(s, f.positions!.start, r.rows, out.tensors[0]);
      if (f.rebuild || !s.downstream) {
        // rebuilt positions: the next shard holds them already (parked: nobody to send to)
        if (f.rebuild) {
          s.answer(replyTo(f, { cacheResult: s.nextPos, rebuild: true, telemetry: [telemetry] }));
        }
        return;
      }
      telemetry.bytesOut = tensorBytes(out);
      telemetry.transport = s.downstream.transport;
      this.#counters.bytesOut += telemetry.bytesOut;
      telemetry.sentUnixMs = unixMs();
      s.downstream.send(out);
      s.lastEncodeMs = codecMs(out);
      return;
    }
    const { start, count } = f.positions!;
    if (f.rebuild) {
      s.answer(replyTo(f, { cacheResult: start + count, rebuild: true, telemetry: [telemetry] }));
      return;
    }
    if (r.rows === 1 && s.grammar) {
      // the grammar is the engine's: a wait (a WASM worker's), then the reply
      const t0 = performance.now();
      this.#sample(s, r.data.slice(), start + count - 1).then(
        (c) => {
          if (s.closed) return;
          telemetry.sampleMs = performance.now() - t0;
          this.#sampled(s, f, telemetry, create(SampledSchema, c));
        },
        (e) => this.#stepFailed(s, f, e),
      );
      return;
    }
    const t0 = performance.now();
    const sampled = r.rows === 1
      ? create(SampledSchema, this.#sampleNow(s, r.data, start + count - 1))
      : undefined;
    telemetry.sampleMs = performance.now() - t0;
    this.#sampled(s, f, telemetry, sampled);
  }

  /** The last shard's reply to a step, with its token. */
  #sampled(s: NodeSession, f: SeamFrame, telemetry: NodeTelemetry, sampled: Sampled | undefined): void {
    const { start, count } = f.positions!;
    const owner = this.#ownerOf(s);
    telemetry.transport = owner?.transport ?? s.upstreamTransport;
    telemetry.sentUnixMs = unixMs();
    const reply = replyTo(f, {
      cacheResult: start + count,
      // last shard first
      telemetry: [telemetry, ...f.telemetry.reverse()],
      sampled,
      crossings: f.crossings + 1,
    });
    s.answer(reply, owner?.send);
    s.lastEncodeMs = codecMs(reply);
  }

  /** The session's token at `position`: its penalties count what it sampled before there. */
  #sampleNow(s: NodeSession, raw: Float32Array, position: number) {
    const { policy, logits } = this.#adjusted(s, raw, position);
    const c = chooseAdjusted(logits, policy, position);
    if (this.#penalized(s)) s.sampledAt.set(position, c.token);
    return c;
  }

  /** #sampleNow under the session's grammar, which rejects tokens before the choice. */
  async #sample(s: NodeSession, raw: Float32Array, position: number) {
    const { policy, logits } = this.#adjusted(s, raw, position);
    if (!(policy?.temperature! > 0) && !policy?.logprobs && !policy?.topLogprobs) {
      // greedy: the best token, if the grammar allows it, is the best of those it allows (and its
      // margin over the runner-up of all tokens is no larger than over the allowed one's)
      const c = chooseAdjusted(logits, policy, position);
      if (await s.grammar!.offer(position, c.token)) {
        if (this.#penalized(s)) s.sampledAt.set(position, c.token);
        return c;
      }
    }
    const masked = logits === raw ? raw.slice() : logits;
    await s.grammar!.mask(masked, position);
    const c = chooseAdjusted(masked, policy, position);
    await s.grammar!.accept(position, c.token);
    if (this.#penalized(s)) s.sampledAt.set(position, c.token);
    return c;
  }

  /** Only a penalized session keeps its tokens: the others pay nothing per token for it. */
  #penalized(s: NodeSession): boolean {
    const p = s.open.sampling;
    return !!p && !!(p.presencePenalty || p.frequencyPenalty || p.repeatPenalty);
  }

  #adjusted(s: NodeSession, raw: Float32Array, position: number) {
    const policy = s.open.sampling;
    const earlier: number[] = [];
    if (this.#penalized(s)) { for (const [at, t] of s.sampledAt) if (at < position) earlier.push(t); }
    // a peer's sizes are not trusted: OpenAI's bound on alternatives
    const bounded = policy && policy.topLogprobs > MAX_TOP_LOGPROBS
      ? { ...policy, topLogprobs: MAX_TOP_LOGPROBS }
      : policy;
    return { policy: bounded, logits: adjusted(raw, bounded, earlier) };
  }

  #stepFailed(s: NodeSession, f: SeamFrame, e: unknown): void {
    if (s.closed) return;
    s.reply(refusal(f, e));
    // an engine failure leaves the session's cache where no frame expects it
    if (errorCode(e) !== "cancelled") void this.#drop(s, `step failed: ${errorText(e)}`);
  }

  /** Release or cancel: frees this shard's KV at once, then passes the frame down the route. */
  async #end(s: NodeSession, f: SeamFrame): Promise<void> {
    if (s.ending) return;
    s.ending = true;
    this.#forgetSent(s);
    this.#retire(s, f.phase === Phase.RELEASE);
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

  /** Passes the next shard's replies back up (step replies too, where the owner has no reply link). */
  async #pump(s: NodeSession, url: string): Promise<void> {
    const link = s.downstream!;
    try {
      for await (const r of link.replies) {
        if (r.rebuild) {
          const w = s.rebuilds.get(r.stepId);
          s.rebuilds.delete(r.stepId);
          if (r.status) w?.reject(new SeamError("unavailable", r.status.message));
          else w?.resolve(r);
          continue;
        }
        if (r.phase === Phase.OPEN && s.open.prefix && !s.open.resume && !r.status) {
          r.hopPositions.push(s.nextPos);
          s.answer(r);
          continue;
        }
        if (r.phase === Phase.OPEN && s.open.resume && !r.status) {
          // the OPEN goes back up once the next shard holds what this one does (rebuilt if it joined)
          void this.#catchUp(s, r).then(() => {
            r.hopPositions.push(s.nextPos);
            r.hopReused.push(s.fromEntry);
            s.answer(r);
          });
          continue;
        }
        // a step's reply climbing back (no reply link): one more crossing
        if (r.crossings > 0) r.crossings++;
        if (r.stepId === 0n && r.status) {
          // the rest of the route lost the session: this shard keeps its part for a repair
          s.reply(r);
          await this.#park(s, r.status.message);
          return;
        }
        s.answer(r);
        if (s.ending && (r.phase === Phase.RELEASE || r.phase === Phase.CANCEL)) {
          s.closed = true;
          link.close();
          return;
        }
      }
      throw new Error("it ended the stream");
    } catch (e) {
      if (s.closed) return;
      if (s.ending) {
        s.closed = true;
        return;
      }
      s.reply(sessionFailure(s.identity, "unavailable", `next shard ${url}: ${errorText(e)}`));
      await this.#park(s, "next shard gone");
    }
  }

  /**
   * A repair's OPEN found this session here at an older epoch: `s` takes over its KV, cut
   * back to the positions the repaired route continues from. False when that cannot be.
   */
  async #adopt(old: NodeSession, s: NodeSession, at: number): Promise<boolean> {
    if (old.closed || old.ending || old.nextPos < at) return false;
    old.closed = true; // its late results are dropped; its stream answers nothing more
    old.downstream?.abort("re-routed");
    void old.grammar?.close();
    for (const w of old.rebuilds.values()) w.reject(new SeamError("cancelled", "re-routed"));
    try {
      await this.#batcher.trim(old.id, at);
    } catch {
      old.closed = false;
      return false;
    }
    s.nextPos = at;
    s.prefixLineage = old.prefixLineage;
    s.sentFrom = Math.min(old.sentFrom, at);
    const sent = old.sent?.filter((e) => e.start < at);
    s.sent = sent && sent.every((e) => e.start + e.rows <= at) ? sent : undefined;
    s.sentBytes = s.sent
      ? s.sent.reduce((n, e) => n + e.tensor.data.length + e.tensor.rowScales.length, 0)
      : 0;
    this.#historyBytes += s.sentBytes - old.sentBytes;
    old.sent = undefined;
    old.sentBytes = 0;
    return true;
  }

  /** Keeps what went to the next shard, while the node's history budget lasts. */
  #keepSent(s: NodeSession, start: number, rows: number, tensor: Tensor): void {
    if (!s.sent) return;
    const bytes = tensor.data.length + tensor.rowScales.length;
    const at = s.sent.length ? s.sent[s.sent.length - 1].start + s.sent[s.sent.length - 1].rows : s.sentFrom;
    if (start !== at || this.#historyBytes + bytes > (this.options.historyBytes ?? HISTORY_BYTES)) {
      this.#forgetSent(s);
      return;
    }
    s.sent.push({ start, rows, tensor });
    s.sentBytes += bytes;
    this.#historyBytes += bytes;
  }

  #forgetSent(s: NodeSession): void {
    this.#historyBytes -= s.sentBytes;
    s.sent = undefined;
    s.sentBytes = 0;
  }

  /**
   * After a resuming OPEN: a next shard that joined empty, or with fewer positions from a prefix
   * entry (a KV snapshot), gets this shard's past outputs from there on as rebuild frames, so it
   * holds the same positions. Other mismatches are left for the driver.
   */
  async #catchUp(s: NodeSession, r: SeamFrame): Promise<void> {
    const last = r.hopPositions.length - 1;
    const from = r.hopPositions[last];
    if (last < 0 || from >= s.nextPos || from < s.sentFrom || !s.sent || !s.downstream) return;
    const hop = s.open.nextHops[0];
    const nEmbd = this.engine.facts.seamWidth;
    const chunks = rebuildChunks(s.sent, nEmbd, PREFILL_CHUNK_TOKENS, from);
    try {
      const replies = chunks.map((c, i) =>
        new Promise<SeamFrame>((resolve, reject) => {
          const stepId = ++s.rebuildStep;
          s.rebuilds.set(stepId, { resolve, reject });
          s.downstream!.send(create(SeamFrameSchema, {
            schemaVersion: SCHEMA_VERSION,
            workId: `${s.workId}/rebuild/${stepId}`,
            sessionId: s.id,
            routeEpoch: s.epoch,
            artifactSha256: this.options.artifactSha256,
            recipeFingerprint: this.engine.recipe,
            range: hop.range,
            phase: Phase.PREFILL,
            positions: { start: c.start, count: c.rows },
            stepId,
            cacheExpect: c.start,
            chunkIndex: i,
            chunkCount: chunks.length,
            rebuild: true,
            tensors: [packTensor("hidden_states", c.data, [c.rows, nEmbd])],
          }));
        })
      );
      await Promise.all(replies);
      r.hopPositions[last] = s.nextPos;
    } catch {
      // left as it was: the driver sees the next shard empty and re-prefills the whole route
    }
  }

  /** A driver frees a session it can no longer reach through its route (parked here). */
  async #cancelParked(f: SeamFrame, reply: (f: SeamFrame) => void): Promise<undefined> {
    await this.#checkTicket(f);
    const s = this.#sessions.get(f.sessionId);
    if (s && s.epoch === f.routeEpoch) await this.#drop(s, "cancelled by its driver");
    reply(replyTo(f, { cacheResult: 0 }));
    return undefined;
  }

  /** The route broke around this session: its KV stays for a repair's OPEN, for a while. */
  async #park(s: NodeSession, why: string): Promise<void> {
    if (s.closed || s.ending || s.parkedUntil) return;
    const parkMs = this.options.parkMs ?? PARK_MS;
    // only a driver that repairs routes asks for it: others' sessions are freed at once
    if (parkMs === 0 || !s.open.parkOnLoss) return await this.#drop(s, why);
    s.parkedUntil = Date.now() + parkMs;
    s.downstream?.abort(why);
    s.downstream = undefined;
    for (const w of s.rebuilds.values()) w.reject(new SeamError("unavailable", why));
    s.rebuilds.clear();
  }

  /** The session leaves the node's table; with `remember`, its epoch is kept against replays
   *  (the oldest go first). */
  #retire(s: NodeSession, remember: boolean): void {
    if (this.#sessions.get(s.id) === s) this.#sessions.delete(s.id);
    void s.grammar?.close();
    if (!remember) return;
    const before = this.#ended.get(s.id);
    this.#ended.delete(s.id);
    this.#ended.set(s.id, before !== undefined && before > s.epoch ? before : s.epoch);
    if (this.#ended.size > ENDED_KEPT) this.#ended.delete(this.#ended.keys().next().value!);
  }

  /** Ends a session this node cannot keep: frees its KV and tears down its downstream
   *  (`remember`: kept against replays, see #ended). */
  async #drop(s: NodeSession, why: string, remember = false): Promise<void> {
    if (s.closed) return;
    s.closed = true;
    this.#forgetSent(s);
    this.#retire(s, remember);
    if (!s.ending) await this.#batcher.release(s.id, why).catch(() => {});
    s.downstream?.abort(why);
  }

  async #expire(): Promise<void> {
    const now = Date.now();
    const unusedMs = this.options.unusedMs ?? UNUSED_MS;
    for (const s of [...this.#sessions.values()]) {
      if (s.parkedUntil && now > s.parkedUntil) await this.#drop(s, "no repair resumed it");
      else if (!s.parkedUntil && !s.ending && s.nextPos === 0 && now - s.openedAt > unusedMs) {
        s.reply(
          sessionFailure(s.identity, "expired", `session ${s.id} opened and unused for ${unusedMs} ms`),
        );
        await this.#drop(s, "opened and never used", true);
      }
    }
    const ids = await this.#batcher.expireIdle(this.options.leaseMs);
    for (const id of ids) {
      const s = this.#sessions.get(id);
      if (!s) continue;
      s.ending = true; // the batcher already freed its KV
      this.#forgetSent(s);
      s.reply(
        sessionFailure(s.identity, "expired", `session ${id} idle past its ${this.options.leaseMs} ms lease`),
      );
      this.#retire(s, true);
      s.closed = true;
      s.downstream?.abort("lease expired");
    }
  }
}
