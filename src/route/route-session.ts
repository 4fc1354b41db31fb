// The route driver: opens a Route Session along a list of shard hops, sends the prompt in
// bounded chunks, runs decode to a stop condition and releases or cancels the route. It sends
// to the first shard only; activations go node to node, and the last shard's token comes
// straight back on the driver's own reply link to it (up the route where there is none).
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  Compression,
  HopSchema,
  type NodeTelemetry,
  type Open,
  OpenSchema,
  Phase,
  type PrefixBlocks,
  PrefixBlocksSchema,
  type SeamFrame,
  SeamFrameSchema,
  type Tensor,
} from "../gen/strata/seam/v1/seam_pb.ts";
import type { Policy } from "../sampling/sampler.ts";
import { SeamError, type SeamErrorCode } from "../seam/errors.ts";
import { prefillChunks } from "../seam/frame.ts";
import { firstAnswer } from "../seam/first-answer.ts";
import { prefillChunkFor } from "./prefill-pipeline.ts";
import { SCHEMA_VERSION } from "../seam/limits.ts";
import type { SeamDialer, SeamLink, SeamTransport } from "../seam/link.ts";
import { packTensor } from "../seam/tensor.ts";
import { unixMs } from "../seam/clock.ts";
import { PREFIX_BLOCK_TOKENS, prefixBlocks } from "./prefix-keys.ts";

/** How long a step may go unanswered by default: what an OpenAI client waits for a reply. */
export const STEP_TIMEOUT_MS = 600_000;
export interface RouteHop {
  readonly url: string;
  readonly range: { readonly start: number; readonly end: number };
  /** the hop's own route ticket */
  readonly ticket: Uint8Array;
}

export type SamplingPolicy = Policy;

export const GREEDY: SamplingPolicy = { temperature: 0, topK: 0, topP: 1, seed: 0n };

export interface SessionOptions {
  readonly sessionId: string;
  readonly epoch: bigint;
  readonly artifactSha256: Uint8Array;
  readonly sampling?: SamplingPolicy;
  /** KV cells the session claims on every shard: prompt plus generated tokens */
  readonly kvCells: number;
  readonly compression?: Compression;
  /**
   * No reply within this long fails the step and cancels the route (default STEP_TIMEOUT_MS).
   * A step may wait behind other sessions' work on a busy node: 16 prompts of 3,000 tokens
   * arriving at once on a route of CPU nodes keep the last one's first chunk queued for minutes.
   * A node that died or left is found sooner, by its seam or by the tracker (NodeWatch).
   */
  readonly stepTimeoutMs?: number;
  /** tokens in each prefill chunk (fixed); without it, the chunk follows `pipelineChunkFloor` */
  readonly prefillChunk?: number;
  /**
   * The smallest chunk a prompt may be cut into to overlap the shards' prefill
   * (`prefill-pipeline.ts`; the tracker's `Route.pipeline_chunk_floor`): 0 or absent, whole
   * 256-token chunks.
   */
  readonly pipelineChunkFloor?: number;
  /**
   * Send the prompt right behind OPEN instead of waiting for the route to accept it: the
   * OPEN round trip leaves time to first token. Nodes take a stream's frames in order, so
   * the prompt never overtakes OPEN; a refused OPEN then surfaces from `prefill`.
   */
  readonly pipelineOpen?: boolean;
  /** this driver repairs routes: shards park the session when its route breaks (Open.park_on_loss) */
  readonly parkOnLoss?: boolean;
  /**
   * Open a reply link to the last shard (default true): its replies then cross once instead of
   * climbing back through every hop. A last shard that refuses it answers up the route.
   */
  readonly replyLink?: boolean;
  /**
   * The prompt, for prefix reuse: its whole blocks are offered to the shards' prefix entries
   * (the route then holds the longest prefix every shard held, and only the rest is
   * prefilled), and at release the shards keep the session's KV under its tokens' blocks.
   */
  readonly prefixOf?: Int32Array;
}

export interface StepReply {
  readonly token: number;
  readonly margin: number;
  /** with Sampling.logprobs: the token's log-probability, and the likeliest alternatives' */
  readonly logprob?: number;
  readonly top?: ReadonlyArray<{ readonly token: number; readonly logprob: number }>;
  /** one entry per node, last shard first */
  readonly telemetry: NodeTelemetry[];
  /** from sending the step to its reply */
  readonly ms: number;
  /** seam crossings the step and its reply made (hops + 1 with a reply link) */
  readonly crossings: number;
  /** what carried the step to the first shard, and the reply back (hops name theirs in telemetry) */
  readonly transport: { readonly first: SeamTransport; readonly reply: SeamTransport };
  /** when the step was sent and its reply taken in (Unix ms): with the nodes' stamps, each crossing */
  readonly sentUnixMs: number;
  readonly receivedUnixMs: number;
}

/** A session re-opened on a repaired route: how much was rebuilt. */
export interface Resumed {
  readonly session: RouteSession;
  /** positions the first shard was given again (it joined without them); the others rebuild each other */
  readonly replayedByDriver: number;
  /** per hop in route order: positions it took from a prefix entry (a KV snapshot) when it joined */
  readonly fromEntries: readonly number[];
}

interface FrameFields {
  readonly positions?: { start: number; count: number };
  readonly cacheExpect?: number;
  readonly rebuild?: boolean;
  readonly chunkIndex?: number;
  readonly chunkCount?: number;
  readonly tensors?: Tensor[];
  readonly open?: Open;
  readonly keep?: PrefixBlocks;
}

interface Waiter {
  readonly resolve: (f: SeamFrame) => void;
  readonly reject: (e: unknown) => void;
  /** when it was sent (performance.now()) */
  readonly sentAt: number;
  /** when it fails unanswered (Date.now()) */
  readonly due: number;
  readonly sentUnixMs: number;
}

export class RouteSession {
  readonly #pending = new Map<bigint, Waiter>();
  #step = 0n;
  #pos = 0;
  #failure?: SeamError;
  #done = false;
  #opening?: Promise<SeamFrame>;
  #usualStepMs = 0;
  /** the reply link to the last shard, while it carries replies */
  #replies?: SeamLink;
  #attachStep = 0n;
  /** the last shard took the reply link: from now on losing it loses replies */
  #attached = false;
  /** when each reply's step was sent and the reply came (Unix ms) */
  readonly #stamps = new WeakMap<SeamFrame, readonly [number, number]>();
  /** one timer watches every step in flight (not one per step) */
  #watchdog?: ReturnType<typeof setTimeout>;
  /** positions the route took from prefix entries at open */
  #reused = 0;
  /** the tokens the route holds, in order, for the prefix keys at release (prefixOf sessions only) */
  readonly #fed?: number[];
  #kept: Uint8Array[] = [];

  private constructor(
    readonly link: SeamLink,
    readonly hops: readonly RouteHop[],
    readonly options: SessionOptions,
  ) {
    if (options.prefixOf) this.#fed = [];
  }

  /** Starts taking replies: from the first shard's stream, and from the last shard's reply link. */
  #start(dial: SeamDialer): void {
    void this.#pump(this.link, `the first shard ${this.hops[0].url}`);
    const last = this.hops[this.hops.length - 1];
    if (this.hops.length < 2 || this.options.replyLink === false) return;
    let link: SeamLink;
    try {
      link = dial(last.url);
    } catch {
      return; // replies come up the route
    }
    this.#replies = link;
    // the other half of the OPEN that follows: its step id, on a stream of its own
    this.#attachStep = this.#step + 1n;
    link.send(hopFrame(this.options, last, "reply-link", Phase.OPEN, this.#attachStep, { replyLink: true }));
    void this.#pump(link, `the last shard ${last.url}`);
  }

  /** Opens the session on every shard (the first forwards the open down the route). */
  static async open(dial: SeamDialer, hops: readonly RouteHop[], o: SessionOptions): Promise<RouteSession> {
    if (hops.length === 0) throw new SeamError("malformed", "a route needs at least one hop");
    // the prompt's whole blocks, but never its last token: the route computes at least that one
    const blocks = o.prefixOf && await prefixBlocks(o.prefixOf.subarray(0, o.prefixOf.length - 1));
    const s = new RouteSession(dial(hops[0].url), hops, o);
    s.#start(dial);
    const open = openBlock(hops, o);
    if (blocks) open.prefix = create(PrefixBlocksSchema, { blockTokens: PREFIX_BLOCK_TOKENS, blocks });
    const opening = s.#call(s.#frame(Phase.OPEN, { open }));
    // a prompt that may start from a prefix waits for OPEN's answer: it says from where
    if (o.pipelineOpen && !blocks?.length) {
      s.#opening = opening;
      opening.catch(() => {}); // awaited by the first step
      return s;
    }
    const r = await s.#accepted(opening);
    if (blocks?.length) s.#fromPrefix(r, o.prefixOf!);
    return s;
  }

  /** OPEN's answer to a prompt's blocks: the route goes on from the fewest positions a shard held. */
  #fromPrefix(r: SeamFrame, prompt: Int32Array): void {
    const at = r.hopPositions;
    let held = at.length === this.hops.length ? Math.min(...at) : 0;
    held = Math.min(held - (held % PREFIX_BLOCK_TOKENS), prompt.length - 1);
    if (!(held > 0)) return;
    this.#pos = this.#reused = held;
    this.#fed?.push(...prompt.subarray(0, held));
  }

  /** Positions the route took from its shards' prefix entries instead of computing them. */
  get reused(): number {
    return this.#reused;
  }

  /** The blocks the shards were asked to keep the session's KV under, at its release. */
  get kept(): readonly Uint8Array[] {
    return this.#kept;
  }

  /**
   * Re-opens a session whose route broke, on a repaired route (a new epoch): shards that
   * still hold it keep its first `held.length` positions, taking back any later ones; a shard
   * that joined is rebuilt by the shard before it, or from `held` when it is the first. With
   * `o.prefixOf` (any value) the OPEN offers `held`'s blocks: a shard that joins with a prefix
   * entry for them (a KV snapshot) is rebuilt only past it.
   * Throws SeamError "resume_failed" (the new route cancelled) when the route cannot go on
   * from there; the caller then re-prefills the whole route.
   */
  static async resume(
    dial: SeamDialer,
    hops: readonly RouteHop[],
    o: SessionOptions,
    held: Int32Array,
  ): Promise<Resumed> {
    if (hops.length === 0 || held.length === 0) throw new SeamError("malformed", "nothing to resume");
    const s = new RouteSession(dial(hops[0].url), hops, o);
    s.#start(dial);
    const n = held.length;
    const open = openBlock(hops, o, true);
    const blocks = o.prefixOf && await prefixBlocks(held);
    if (blocks?.length) {
      open.prefix = create(PrefixBlocksSchema, { blockTokens: PREFIX_BLOCK_TOKENS, blocks });
    }
    let fromEntries: number[] = [];
    await s.#accepted(
      s.#call(s.#frame(Phase.OPEN, { cacheExpect: n, open })).then((r) => {
        fromEntries = [...r.hopReused].reverse();
        return s.#resumed(r, n);
      }),
    );
    s.#fed?.push(...held);
    let replayed = 0;
    if (s.#pos < n) {
      // the first shard joined without them (or with a prefix entry's): it gets the rest of the
      // tokens again and answers itself
      const from = s.#pos;
      const chunks = prefillChunks(from, n - from, s.#chunkOf(n - from));
      await Promise.all(chunks.map((c) =>
        s.#call(
          s.#frame(Phase.PREFILL, {
            positions: { start: c.start, count: c.tokens },
            chunkIndex: c.index,
            chunkCount: c.count,
            rebuild: true,
            tensors: [packTensor("token_ids", held.subarray(c.start, c.start + c.tokens), [c.tokens])],
          }),
          c.tokens,
        )
      )).catch(async (e) => {
        await s.cancel();
        throw e;
      });
      replayed = n - from;
    }
    return { session: s, replayedByDriver: replayed, fromEntries };
  }

  /** A resuming OPEN's answer: every shard past the first must hold n positions (the first at most). */
  async #resumed(r: SeamFrame, n: number): Promise<SeamFrame> {
    const at = [...r.hopPositions].reverse();
    const ok = at.length === this.hops.length && at.slice(1).every((p) => p === n) && at[0] <= n;
    if (!ok) {
      await this.cancel();
      throw new SeamError(
        "resume_failed",
        `the repaired route holds [${at.join(", ")}] positions per hop; it continues from ${n}`,
      );
    }
    this.#pos = at[0];
    return r;
  }

  /**
   * Frees a session parked on a shard of a broken route (the driver cannot reach it through
   * that route any more), with the hop's ticket for the old epoch.
   */
  static async releaseParked(
    dial: SeamDialer,
    hop: RouteHop,
    o: Pick<SessionOptions, "sessionId" | "epoch" | "artifactSha256">,
    timeoutMs = 2_000,
  ): Promise<void> {
    const link = dial(hop.url);
    try {
      link.send(hopFrame(o, hop, "release-parked", Phase.CANCEL, 1n));
      await firstAnswer(link, timeoutMs, hop.url);
    } catch {
      // a hop that cannot be reached frees the session when its parking ends
    } finally {
      link.close();
    }
  }

  /** OPEN's answer: a refusal ends the link and is the error the caller sees. */
  async #accepted(opening: Promise<SeamFrame>): Promise<SeamFrame> {
    try {
      return await opening;
    } catch (e) {
      this.link.abort("open refused");
      this.#replies?.abort("open refused");
      throw e;
    }
  }

  /** With pipelineOpen: waits for OPEN's answer once, before a step's own replies count. */
  async #opened(sent: Promise<unknown>[]): Promise<void> {
    const opening = this.#opening!;
    this.#opening = undefined;
    // a step refused before OPEN's answer came fails the prompt at once: a first shard that drops
    // the session (no room for the prompt) drops OPEN's answer on its way back too. A refused
    // OPEN is answered before any step behind it: its reason comes first
    const refused = new Promise<never>((_, reject) => {
      for (const p of sent) p.catch(reject);
    });
    await Promise.race([this.#accepted(opening), refused]);
  }

  /** Tokens the route holds for this session. */
  get position(): number {
    return this.#pos;
  }

  /** Tokens in each chunk of an n-token prompt. */
  #chunkOf(n: number): number {
    return this.options.prefillChunk ?? prefillChunkFor(n, this.options.pipelineChunkFloor ?? 0);
  }

  /** Sends the prompt in bounded chunks (pipelined); resolves with the first sampled token. */
  async prefill(tokens: Int32Array): Promise<StepReply> {
    const t0 = performance.now();
    const chunks = prefillChunks(this.#pos, tokens.length, this.#chunkOf(tokens.length));
    if (this.#fed?.length === this.#pos) this.#fed.push(...tokens);
    const replies = chunks.map((c) =>
      this.#call(
        this.#frame(Phase.PREFILL, {
          positions: { start: c.start, count: c.tokens },
          chunkIndex: c.index,
          chunkCount: c.count,
          tensors: [
            packTensor(
              "token_ids",
              tokens.subarray(c.start - chunks[0].start, c.start - chunks[0].start + c.tokens),
              [c.tokens],
            ),
          ],
        }),
        c.tokens,
      )
    );
    if (this.#opening) await this.#opened(replies);
    const all = await Promise.all(replies);
    return this.#reply(all[all.length - 1], t0);
  }

  /** One token through the route; resolves with the next sampled token. */
  async decode(token: number): Promise<StepReply> {
    const t0 = performance.now();
    if (this.#fed?.length === this.#pos) this.#fed.push(token);
    const f = this.#frame(Phase.DECODE, {
      positions: { start: this.#pos, count: 1 },
      tensors: [packTensor("token_ids", Int32Array.of(token), [1])],
    });
    const reply = this.#call(f, 1);
    if (this.#opening) await this.#opened([reply]);
    return this.#reply(await reply, t0);
  }

  /**
   * Prefill, then decode until `stop` says so or `maxNew` tokens came; yields every sampled
   * token. A resumed session holds all of `prompt` but its last token, which it decodes.
   */
  async *generate(
    prompt: Int32Array,
    maxNew: number,
    stop: (token: number) => boolean,
  ): AsyncGenerator<StepReply> {
    let r: StepReply;
    if (this.#reused > 0 && this.#pos === this.#reused) {
      // a prefix the shards held: only the rest of the prompt is computed
      r = await this.prefill(prompt.subarray(this.#pos));
    } else {
      if (this.#pos > 0 && this.#pos !== prompt.length - 1) {
        throw new SeamError("bad_position", `the route holds ${this.#pos} of ${prompt.length} tokens`);
      }
      r = this.#pos > 0 ? await this.decode(prompt[this.#pos]) : await this.prefill(prompt);
    }
    yield r;
    for (let i = 1; i < maxNew && !stop(r.token); i++) {
      r = await this.decode(r.token);
      yield r;
    }
  }

  /** Ends the session normally on every shard. */
  async release(): Promise<void> {
    await this.#finish(Phase.RELEASE);
  }

  /** Abandons work in flight and frees the session on every shard. */
  async cancel(): Promise<void> {
    for (const [, w] of this.#pending) w.reject(new SeamError("cancelled", "the session was cancelled"));
    this.#pending.clear();
    await this.#finish(Phase.CANCEL).catch(() => {});
  }

  /**
   * The route lost a node (its owner learned it from elsewhere): work in flight fails with
   * `e` at once, and the nodes still there free the session. Nothing waits for a dead hop.
   */
  abandon(e: SeamError): void {
    if (this.#done || this.#failure) return;
    this.#fail(e);
    this.link.send(this.#frame(Phase.CANCEL, {}));
    this.#done = true;
    this.link.close();
    this.#replies?.close();
  }

  /**
   * The route lost a node and a repair will resume the session: work in flight fails with
   * `e`, and the stream is torn down (not ended: a clean end frees the session), so the
   * nodes still there park it.
   */
  detach(e = new SeamError("unavailable", "the route was left for a repair")): void {
    if (this.#done) return;
    this.#fail(e);
    this.#done = true;
    this.link.abort("left for a repair");
    this.#replies?.abort("left for a repair");
  }

  async #finish(phase: Phase.RELEASE | Phase.CANCEL): Promise<void> {
    if (this.#done) return;
    try {
      // a release keys what the route holds by its tokens' blocks: the shards may keep it
      const fed = this.#fed;
      const keep = phase === Phase.RELEASE && fed && fed.length >= this.#pos
        ? create(PrefixBlocksSchema, {
          blockTokens: PREFIX_BLOCK_TOKENS,
          blocks: await prefixBlocks(Int32Array.from(fed.slice(0, this.#pos))),
        })
        : undefined;
      if (!this.#failure) {
        await this.#call(this.#frame(phase, { keep }));
        this.#kept = keep?.blocks ?? [];
      }
    } finally {
      this.#done = true;
      clearTimeout(this.#watchdog);
      this.link.close();
      this.#replies?.close();
    }
  }

  #frame(phase: Phase, fields: FrameFields): SeamFrame {
    const o = this.options;
    this.#step++;
    return create(SeamFrameSchema, {
      schemaVersion: SCHEMA_VERSION,
      workId: `${o.sessionId}/${this.#step}`,
      sessionId: o.sessionId,
      routeEpoch: o.epoch,
      artifactSha256: o.artifactSha256,
      range: this.hops[0].range,
      phase,
      stepId: this.#step,
      cacheExpect: fields.cacheExpect ?? (fields.positions ? this.#pos : 0),
      crossings: 1,
      ...fields,
    });
  }

  #call(f: SeamFrame, advance = 0): Promise<SeamFrame> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#done) return Promise.reject(new SeamError("unknown_session", "the session has ended"));
    this.#pos += advance;
    return new Promise((resolve, reject) => {
      const due = Date.now() + (this.options.stepTimeoutMs ?? STEP_TIMEOUT_MS);
      this.#pending.set(f.stepId, { resolve, reject, sentAt: performance.now(), due, sentUnixMs: unixMs() });
      this.#watch();
      if (!this.link.send(f)) {
        this.#fail(new SeamError("unavailable", `the seam to the first shard ${this.hops[0].url} has ended`));
      }
    });
  }

  /** Arms the one timer for the oldest step in flight: past the step timeout, the route is cancelled. */
  #watch(): void {
    if (this.#watchdog !== undefined || this.#pending.size === 0) return;
    // steps are answered in the order sent: the first in the map is the oldest
    const [step, oldest] = this.#pending.entries().next().value!;
    if (oldest.due <= Date.now()) {
      const timeout = this.options.stepTimeoutMs ?? STEP_TIMEOUT_MS;
      this.#fail(new SeamError("deadline", `no reply to step ${step} within ${timeout} ms`));
      void this.cancel();
      return;
    }
    this.#watchdog = setTimeout(() => {
      this.#watchdog = undefined;
      this.#watch();
    }, oldest.due - Date.now());
  }

  /**
   * How long the oldest step in flight has waited for its reply (0: none in flight), and
   * how long a decode step usually takes here: together they tell a stuck route from a slow one.
   */
  stalled(): { waitingMs: number; usualStepMs: number } {
    let oldest = Infinity;
    for (const w of this.#pending.values()) oldest = Math.min(oldest, w.sentAt);
    return {
      waitingMs: oldest === Infinity ? 0 : performance.now() - oldest,
      usualStepMs: this.#usualStepMs,
    };
  }

  #reply(f: SeamFrame, t0: number): StepReply {
    if (!f.sampled) throw new SeamError("malformed", `the last shard sent no token for step ${f.stepId}`);
    const ms = performance.now() - t0;
    // a slow average: one quick step says little about the next
    this.#usualStepMs = this.#usualStepMs === 0 ? ms : 0.8 * this.#usualStepMs + 0.2 * ms;
    return {
      token: f.sampled.token,
      margin: f.sampled.margin,
      logprob: f.sampled.logprob,
      top: f.sampled.top.map((t) => ({ token: t.token, logprob: t.logprob })),
      telemetry: f.telemetry,
      ms,
      crossings: f.crossings,
      transport: { first: this.link.transport, reply: (this.#replies ?? this.link).transport },
      sentUnixMs: this.#stamps.get(f)?.[0] ?? 0,
      receivedUnixMs: this.#stamps.get(f)?.[1] ?? 0,
    };
  }

  /** Replies from one of the session's links (steps may be answered on either). */
  async #pump(link: SeamLink, peer: string): Promise<void> {
    try {
      for await (const r of link.replies) {
        if (link === this.#replies && r.stepId === this.#attachStep) {
          // a last shard that will not send replies here sends them up the route
          if (r.status) this.#dropReplyLink();
          else this.#attached = true;
          continue;
        }
        const w = this.#pending.get(r.stepId);
        if (!w) {
          // step id 0: the route lost the session; other unknown ids are answers to duplicates
          if (r.stepId === 0n && r.status) this.#fail(new SeamError(code(r.status.code), r.status.message));
          continue;
        }
        this.#pending.delete(r.stepId);
        if (r.status) w.reject(new SeamError(code(r.status.code), r.status.message));
        else {
          this.#stamps.set(r, [w.sentUnixMs, unixMs()]);
          w.resolve(r);
        }
      }
      if (this.#unattached(link)) return;
      if (!this.#done && (link === this.link || link === this.#replies)) {
        this.#fail(new SeamError("unavailable", `${peer} ended the stream`));
      }
    } catch (e) {
      if (this.#unattached(link) || (link !== this.link && link !== this.#replies)) return;
      this.#fail(
        new SeamError("unavailable", `seam to ${peer} failed: ${e instanceof Error ? e.message : e}`),
      );
    }
  }

  /** A reply link that ended before the last shard took it: replies come up the route. */
  #unattached(link: SeamLink): boolean {
    if (link !== this.#replies || this.#attached) return false;
    this.#dropReplyLink();
    return true;
  }

  #dropReplyLink(): void {
    this.#replies?.close();
    this.#replies = undefined;
  }

  #fail(e: SeamError): void {
    this.#failure ??= e;
    clearTimeout(this.#watchdog);
    this.#watchdog = undefined;
    for (const [, w] of this.#pending) w.reject(e);
    this.#pending.clear();
  }
}

const code = (c: string) => c as SeamErrorCode;

/** What OPEN carries for the first shard: its ticket, the policy, the rest of the route. */
function openBlock(hops: readonly RouteHop[], o: SessionOptions, resume = false): Open {
  return create(OpenSchema, {
    routeTicket: hops[0].ticket,
    sampling: o.sampling ?? GREEDY,
    nextHops: hops.slice(1).map((h) =>
      create(HopSchema, { url: h.url, range: h.range, routeTicket: h.ticket })
    ),
    kvCells: o.kvCells,
    routeShards: hops.length,
    seamCompression: o.compression ?? Compression.NONE,
    parkOnLoss: o.parkOnLoss ?? false,
    resume,
  });
}

/** A frame the driver sends one hop on a stream of its own, with that hop's ticket. */
export function hopFrame(
  o: Pick<SessionOptions, "sessionId" | "epoch" | "artifactSha256">,
  hop: RouteHop,
  what: string,
  phase: Phase,
  stepId: bigint,
  open: { replyLink?: boolean; nextHops?: MessageInitShape<typeof HopSchema>[] } = {},
): SeamFrame {
  return create(SeamFrameSchema, {
    schemaVersion: SCHEMA_VERSION,
    workId: `${o.sessionId}/${what}`,
    sessionId: o.sessionId,
    routeEpoch: o.epoch,
    artifactSha256: o.artifactSha256,
    range: hop.range,
    phase,
    stepId,
    open: create(OpenSchema, { routeTicket: hop.ticket, ...open }),
  });
}
