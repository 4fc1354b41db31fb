// One generation: the prompt through a route the tracker handed out, tokens turned into text
// (held back at a possible stop sequence or a split UTF-8 character), a route that loses a node
// repaired, and the session released or cancelled. Runtime-agnostic: the seams come in as a
// dial function, and notes go to the host's log.
import { Code, ConnectError } from "@connectrpc/connect";
import type { Tokenizer } from "../engine/tokenizer.ts";
import { ApiError, type GenerationRequest } from "./openai.ts";
import { StopMatcher } from "./stop.ts";
import { GenerationTelemetry } from "./telemetry.ts";
import { contextCap, contextWindow } from "../route/context-window.ts";
import type { PrefixAffinity } from "./prefix-affinity.ts";
import { RouteSession, type SamplingPolicy, type StepReply } from "../route/route-session.ts";
import { SeamError } from "../seam/errors.ts";
import type { SeamLink } from "../seam/link.ts";
import type { RepairAsk, RouteLease } from "./lease.ts";
import type { NodeWatch } from "./node-watch.ts";
import type { ActiveRoutes } from "./active-routes.ts";
import { blamedHops, repairable } from "./repair.ts";
import type { LoadHistory } from "./load-history.ts";
import { type MirrorPort, mirrorRoute } from "./kv-mirror.ts";

/** A step in flight this long (or 4 usual steps) through a node that left: the route is stuck. */
const STUCK_MS = 2_000;

export interface GenerationContext {
  readonly tokenizer: Tokenizer;
  /** a seam to a hop's URL */
  readonly dial: (url: string) => SeamLink;
  /** the host's structured log (repairs are worth a line) */
  readonly log: (message: string, fields: Record<string, unknown>) => void;
  readonly artifact: Uint8Array;
  readonly nCtxTrain: number;
  /** the tracker's word on the nodes of open sessions */
  readonly watch: NodeWatch;
  /** sessions now, by route (the network page) */
  readonly routes: ActiveRoutes;
  /** how a session whose route lost a node goes on (none: the failure ends it) */
  readonly repair?: RepairPort;
  /** the gateway's load over time (the network page's charts) */
  readonly history?: LoadHistory;
  /** offer prompts' prefixes to the shards' prefix entries and let them keep sessions' KV
   *  (default true) */
  readonly prefixReuse?: boolean;
  /** where this gateway's sessions' KV was kept: new prompts prefer those nodes */
  readonly affinity?: PrefixAffinity;
  /** send each session's prompt KV to standby nodes, for repairs (kv-mirror.ts; needs prefixReuse) */
  readonly mirror?: MirrorPort;
}

/** What a repair asks of the gateway. */
export interface RepairPort {
  /** a new route for the session without the lost nodes (waits its turn while routes are busy) */
  reroute(ask: RepairAsk, signal: AbortSignal): Promise<RouteLease>;
  /** of these nodes, those the tracker no longer sees as live */
  dead(nodes: readonly string[]): Promise<string[]>;
  /** a session that cannot get a new route this long after its failure ends with it */
  readonly deadlineMs: number;
  /** nodes still there keep the session and only lost hops are rebuilt (false: re-prefill it all) */
  readonly resume: boolean;
}

/** One generated token's log-probability and the likeliest alternatives', as text pieces. */
export interface TokenLogprobs {
  readonly token: string;
  readonly bytes: number[];
  readonly logprob: number;
  readonly top: ReadonlyArray<{ readonly token: string; readonly bytes: number[]; readonly logprob: number }>;
}

export interface Generated {
  readonly text: string;
  /** with `req.logprobs`: one entry per token of `text` */
  readonly logprobs: TokenLogprobs[];
  readonly finishReason: "stop" | "length";
  readonly promptTokens: number;
  /** of them, those a route's shards held already (prefix reuse) */
  readonly cachedTokens: number;
  readonly completionTokens: number;
  readonly telemetry: GenerationTelemetry;
}

/**
 * What the prompt and `max_tokens` take of the lease's route: the 400 a client gets past the
 * route's context, which a streamed request needs before its first byte.
 */
export function routeWindow(
  ctx: Pick<GenerationContext, "nCtxTrain">,
  lease: Pick<RouteLease, "route">,
  ids: Int32Array,
  req: GenerationRequest,
) {
  const window = contextWindow(
    ids.length,
    req.maxNewTokens,
    contextCap(ctx.nCtxTrain, lease.route.maxSessionCells),
  );
  if ("refused" in window) {
    throw new ApiError(400, window.refused, "invalid_request_error", "context_length_exceeded", "max_tokens");
  }
  return window;
}

/**
 * Generates on the lease's route; `onText` gets each releasable piece. A route that loses a
 * node is repaired (`repair.ts`): the session goes on through a new route from the tokens
 * already sent, and the client sees only a longer gap. Cancels the route when `signal`
 * aborts. The caller ends the lease; leases taken for repairs end here.
 */
export async function generate(
  ctx: GenerationContext,
  lease: Pick<RouteLease, "sessionId" | "route">,
  req: GenerationRequest,
  ids: Int32Array,
  signal: AbortSignal,
  onText: (piece: string, logprobs: TokenLogprobs[]) => void | Promise<void>,
): Promise<Generated> {
  const window = routeWindow(ctx, lease, ids, req);
  if (signal.aborted) throw new SeamError("cancelled", "the client went away");
  const telemetry = new GenerationTelemetry(lease.route.name);
  const tok = ctx.tokenizer;
  const out: number[] = [];
  const stop = new StopMatcher(req.stop);
  // text of out[0, base), which ends on a whole character: each token decodes only what is new
  let clean = "";
  let base = 0;
  let shown = "";
  // tokens whose text is not out yet, and every entry of the text that is
  const pending: TokenLogprobs[] = [];
  const logprobs: TokenLogprobs[] = [];
  const show = async (piece: string) => {
    shown += piece;
    const entries = pending.splice(0);
    logprobs.push(...entries);
    await onText(piece, entries);
  };
  let finishReason: "stop" | "length" = "length";
  let hitStop = false;
  // the route in use: the caller's lease, or one a repair took (ended here)
  let route: Lease = lease;
  let on: OnRoute | undefined;
  // prompt tokens the first route took from its shards' prefix entries
  let cachedTokens: number | undefined;
  try {
    // a session whose KV cells ran out (its own cap, or the node's pool ran short and it gave
    // way) ends like one that reached max_tokens: finish_reason length, the text so far
    let kvEnded = false;
    // set while a repair is under way: when the failure came, why, whom it blamed, and the
    // route whose nodes may still hold the session (parked: a lost-hop repair resumes it)
    let broken:
      | {
        at: number;
        why: string;
        nodes: string[];
        /** the range each of `nodes` held when it was lost */
        lostAt: Map<string, string>;
        parked?: Lease;
        routed?: number;
        opened?: number;
      }
      | undefined;
    // routes that refused the session as full before giving it a token
    let refusedFull = 0;
    // standby nodes that took a KV snapshot of the session's prompt, and its positions
    const mirrors = new Map<string, number>();
    let mirroring = false;
    for (;;) {
      let progressed = false;
      try {
        const prefix = out.length ? Int32Array.from([...ids, ...out]) : ids;
        // a repair with tokens sent resumes: the route holds the prefix but its last token
        const held = broken?.parked ? prefix.subarray(0, prefix.length - 1) : undefined;
        on = await onRoute(ctx, route, req, window.kvCells, signal, out, held, prefix);
        if (cachedTokens === undefined) {
          cachedTokens = on.session.reused;
          telemetry.reusedPrefix(cachedTokens, nodesOf(route));
        }
        if (broken) broken.opened = performance.now();
        if (broken?.parked) releaseParked(ctx, broken.parked, [...broken.nodes, ...nodesOf(route)]);
        let first = true;
        for await (
          const r of on.session.generate(
            prefix,
            window.newTokens - out.length,
            (t) => tok.isEndOfGeneration(t),
          )
        ) {
          if (signal.aborted) throw new SeamError("cancelled", "the client went away");
          if (first && !broken && !mirroring && ctx.mirror && ctx.prefixReuse !== false) {
            // the prompt is in on every shard: its KV goes to standbys while the answer goes on
            mirroring = true;
            void mirrorRoute({ ...ctx, mirror: ctx.mirror }, route, prefix, (n, p) => mirrors.set(n, p));
          }
          if (broken && first) {
            const kept = new Set(broken.parked ? nodesOf(broken.parked) : []);
            const hops = route.route.hops;
            const held = on.resumed ? prefix.length - 1 : prefix.length;
            // per rebuilt hop: positions it took from a KV snapshot, and those it computed again
            const rebuilt = hops.map((h, i) => ({ h, snap: on!.fromEntries[i] ?? 0 }))
              .filter(({ h }) => !on!.resumed || !kept.has(h.node))
              .map(({ h, snap }) => ({ layers: h.range!.end - h.range!.start, snap, again: held - snap }));
            telemetry.repaired({
              nodes: broken.nodes,
              why: broken.why,
              ms: performance.now() - broken.at,
              route_ms: (broken.routed ?? broken.at) - broken.at,
              open_ms: (broken.opened ?? broken.at) - (broken.routed ?? broken.at),
              kind: on.resumed ? "lost_hop" : "whole_route",
              ...(on.resumed ? {} : { whole_route_why: on.notResumed ?? notResumable(ctx, out.length) }),
              hops_rebuilt: rebuilt.length,
              layers_rebuilt: rebuilt.reduce((n, r) => n + r.layers, 0),
              replayed_positions: Math.max(0, ...rebuilt.map((r) => r.again)),
              snapshot_positions: Math.max(0, ...rebuilt.map((r) => r.snap)),
              layer_positions_rebuilt: rebuilt.reduce((n, r) => n + r.layers * r.again, 0),
              route: route.route.name,
            });
            broken = undefined;
          }
          first = false;
          progressed = true;
          // the request's first token (a repaired route's first reply is not): the telemetry's TTFT
          const firstToken = telemetry.ttftMs === undefined;
          telemetry.step(r.telemetry, r.crossings);
          if (ctx.history) {
            const now = Date.now();
            if (firstToken) ctx.history.firstToken(now, telemetry.ttftMs!);
            ctx.history.step(now, r.telemetry);
          }
          if (tok.isEndOfGeneration(r.token)) {
            finishReason = "stop";
            break;
          }
          out.push(r.token);
          if (req.logprobs) pending.push(tokenLogprobs(tok, r));
          const tail = tok.detokenize(out.slice(base));
          if (tail.endsWith("\uFFFD")) continue; // a character split across tokens
          clean += tail;
          base = out.length;
          const { release, stopped } = stop.update(clean);
          if (release) await show(release);
          if (stopped) {
            finishReason = "stop";
            hitStop = true;
            break;
          }
        }
        break;
      } catch (e) {
        // the KV pool ran short: a session with tokens out ends there (finish_reason length); one
        // that had none yet waits for room and tries again, as long as a repair may take
        const poolShort = e instanceof SeamError && e.code === "context_full";
        if (poolShort && (out.length > 0 || progressed)) {
          kvEnded = true;
          finishReason = "length";
          break;
        }
        const failed = on;
        on = undefined;
        // a node may still hold slots of sessions whose routes just died (the tracker's count
        // has let them go): a route refused as full before its first token is tried again,
        // a few times, after a pause
        const full = poolShort ||
          e instanceof SeamError && (e.code === "kv_full" || e.code === "overloaded") &&
            !progressed && refusedFull < FULL_RETRIES;
        const repairing = (repairable(e) || full) && !signal.aborted && !!ctx.repair;
        // with tokens sent, the nodes still there keep the session (parked) for a resume;
        // otherwise they free it now
        const resumable = repairing && repairable(e) && out.length > 0 && ctx.repair!.resume;
        if (resumable) failed?.detach();
        else failed?.abandon(e);
        if (broken?.parked && (!resumable || failed)) {
          // an earlier repair's parked route is not the one to resume from any more
          releaseParked(ctx, broken.parked, broken.nodes);
          broken.parked = undefined;
        }
        if (!repairing) {
          // what a cancelled session's steps answer with is the client's leaving
          throw signal.aborted ? new SeamError("cancelled", "the client went away") : e;
        }
        if (full) {
          refusedFull++;
          await new Promise((r) => setTimeout(r, FULL_PAUSE_MS));
        }
        const at = broken?.at ?? performance.now();
        if (performance.now() - at > ctx.repair.deadlineMs) {
          if (poolShort) {
            throw new SeamError(
              "kv_full",
              `the routes' KV pools had no room for ${ctx.repair.deadlineMs} ms`,
            );
          }
          throw new SeamError(
            "unavailable",
            `no route could take over within ${ctx.repair.deadlineMs} ms: ${e.message}`,
          );
        }
        const hops = route.route.hops.map((h) => ({ node: h.node, url: h.url }));
        const nodes = [
          ...new Set([
            ...(broken?.nodes ?? []),
            ...blamedHops(e.message, hops),
            ...await ctx.repair.dead(hops.map((h) => h.node)),
          ]),
        ];
        const parked = resumable && failed ? route : broken?.parked;
        const lostAt = new Map(broken?.lostAt);
        for (const h of route.route.hops) {
          if (nodes.includes(h.node) && h.range) lostAt.set(h.node, `${h.range.start}:${h.range.end}`);
        }
        broken = { at, why: `${e.code}: ${e.message}`, nodes, lostAt, parked };
        ctx.log("repairing a route", {
          session: route.sessionId,
          route: route.route.name,
          avoid: nodes,
          why: broken.why,
        });
        await route.end?.();
        const keep = parked ? nodesOf(parked).filter((n) => !nodes.includes(n)) : [];
        const ask = {
          sessionId: route.sessionId,
          avoid: nodes,
          lostAt,
          keep,
          afterEpoch: route.route.epoch,
          prefer: [...mirrors.keys()].filter((n) => !nodes.includes(n)),
        };
        route = await rerouted(ctx.repair, ask, signal, at).catch((r) => {
          if (parked) releaseParked(ctx, parked, nodes);
          if (!(r instanceof ConnectError)) throw r;
          const lost = nodes.length ? `lost ${nodes.join(", ")}` : `failed (${e.message})`;
          throw new ApiError(
            503,
            `the route ${lost} and no route could take over within ${
              ctx.repair!.deadlineMs
            } ms: ${r.rawMessage}`,
            "server_error",
            "no_route",
          );
        });
        broken.routed = performance.now();
      }
    }
    if (!hitStop) {
      const rest = stop.flush();
      if (rest) await show(rest);
    }
    if (kvEnded) await on?.session.cancel();
    else {
      // every token is out: a route that fails now only frees what is left of the session
      await on?.session.release().catch((e) => on?.abandon(e));
      if (on?.session.kept.length) ctx.affinity?.kept(on.session.kept, nodesOf(route));
    }
  } catch (e) {
    await on?.session.cancel();
    throw e;
  } finally {
    on?.close();
    await route.end?.();
  }
  return {
    // what was shown: a character the last tokens only began (max_tokens cut it) is left out,
    // streamed or not, so both answers are the same bytes
    text: shown,
    logprobs,
    finishReason,
    promptTokens: ids.length,
    cachedTokens: cachedTokens ?? 0,
    completionTokens: out.length,
    telemetry,
  };
}

type Lease = Pick<RouteLease, "sessionId" | "route"> & Partial<Pick<RouteLease, "end">>;

/** A route refused as full is tried again this many times, this long apart. */
const FULL_RETRIES = 4, FULL_PAUSE_MS = 500;

/** How often a repair asks again while the tracker cannot be reached (it may be restarting). */
const TRACKER_RETRY_MS = 250;

/** A new route, waiting out a tracker that cannot be reached until the repair's deadline. */
async function rerouted(
  repair: RepairPort,
  ask: RepairAsk,
  signal: AbortSignal,
  brokenAt: number,
): Promise<RouteLease> {
  for (;;) {
    try {
      return await repair.reroute(ask, signal);
    } catch (e) {
      const down = e instanceof ConnectError &&
        (e.code === Code.Unavailable || e.code === Code.DeadlineExceeded);
      if (!down || signal.aborted || performance.now() - brokenAt > repair.deadlineMs) throw e;
      await new Promise((r) => setTimeout(r, TRACKER_RETRY_MS));
    }
  }
}

/** Why a repair did not try to keep the nodes still there. */
const notResumable = (ctx: GenerationContext, sent: number) =>
  !ctx.repair?.resume
    ? "the lost-hop rebuild is off (--no-repair-resume)"
    : sent === 0
    ? "no token had been sent"
    : "the failure left nothing to resume";

const nodesOf = (lease: Lease) => lease.route.hops.map((h) => h.node);

const hopsOf = (lease: Lease) =>
  lease.route.hops.map((h) => ({ url: h.url, range: h.range!, ticket: h.routeTicket }));

/**
 * Frees the session on the nodes of a broken route that still park it (a client that left
 * during a repair, or a repair that did not resume there), except on `skip`: lost nodes, and
 * those the new route took over. In the background: parking ends by itself too.
 */
function releaseParked(ctx: GenerationContext, parked: Lease, skip: readonly string[]): void {
  const o = { sessionId: parked.sessionId, epoch: parked.route.epoch, artifactSha256: ctx.artifact };
  const hops = hopsOf(parked);
  parked.route.hops.forEach((h, i) => {
    if (!skip.includes(h.node)) void RouteSession.releaseParked(ctx.dial, hops[i], o);
  });
}

/** A session open on one route, with what watches it. */
interface OnRoute {
  readonly session: RouteSession;
  /** a repair that resumed: the nodes still there kept the session */
  readonly resumed: boolean;
  /** a repair that tried to resume and could not: why */
  readonly notResumed?: string;
  /** a resumed repair: per hop, positions it took from a KV snapshot when it joined */
  readonly fromEntries: readonly number[];
  /** the route failed: work in flight ends, the nodes still there free the session */
  abandon(e: unknown): void;
  /** the route failed and a repair resumes it: the nodes still there keep the session */
  detach(): void;
  close(): void;
}

/** Opens the session on the lease's route; with `held`, resumes it where the broken route stood. */
async function onRoute(
  ctx: GenerationContext,
  lease: Lease,
  req: GenerationRequest,
  kvCells: number,
  signal: AbortSignal,
  generated: readonly number[],
  held: Int32Array | undefined,
  prompt: Int32Array,
): Promise<OnRoute> {
  const { sessionId, route } = lease;
  const hops = hopsOf(lease);
  const options = {
    sessionId,
    epoch: route.epoch,
    artifactSha256: ctx.artifact,
    sampling: samplingOf(req, generated),
    kvCells,
    // the tracker's choice for this route (q8 rows through the relay)
    compression: route.seamCompression,
    // the tracker's choice too: CPU routes prefill a prompt's chunks side by side
    pipelineChunkFloor: route.pipelineChunkFloor,
    // the nodes keep the session for this gateway's repair when the route breaks
    parkOnLoss: ctx.repair?.resume ?? false,
  };
  let session: RouteSession | undefined;
  let notResumed: string | undefined;
  let fromEntries: readonly number[] = [];
  if (held?.length) {
    // a hop that joins may hold a KV snapshot of the session's prefix (a mirror's standby)
    const resuming = { ...options, prefixOf: ctx.prefixReuse === false ? undefined : held };
    session = await RouteSession.resume(ctx.dial, hops, resuming, held).then((r) => {
      fromEntries = r.fromEntries;
      return r.session;
    }, (e) => {
      // a route that cannot go on from there re-prefills the whole prefix instead
      if (e instanceof SeamError && e.code === "resume_failed") {
        ctx.log("repair re-prefills the whole route", { session: sessionId, why: e.message });
        notResumed = e.message;
        return undefined;
      }
      throw e;
    });
  }
  const resumed = session !== undefined;
  // the prompt follows OPEN at once: the OPEN round trip leaves TTFT
  // (a prompt that may start from its shards' prefix entries waits for OPEN's answer)
  session ??= await RouteSession.open(ctx.dial, hops, {
    ...options,
    pipelineOpen: true,
    prefixOf: ctx.prefixReuse === false ? undefined : prompt,
  });
  const abort = () => void session.cancel();
  signal.addEventListener("abort", abort);
  // a node of the route that left the tracker ends the session, even if its seam said
  // nothing, once the route is stuck: a step waiting far longer than steps take here
  const closeRoute = ctx.routes.open(route.name);
  const unwatch = ctx.watch.watch(route.hops.map((h) => h.node), (node) => {
    const { waitingMs, usualStepMs } = session.stalled();
    if (waitingMs >= Math.max(STUCK_MS, 4 * usualStepMs)) {
      // the nodes still there keep the session for the repair this failure starts
      session.detach(new SeamError("unavailable", `node ${node} left the network`));
    }
  });
  if (signal.aborted) abort(); // the client left while the session opened
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    signal.removeEventListener("abort", abort);
    unwatch();
    closeRoute();
  };
  return {
    session,
    resumed,
    notResumed,
    fromEntries,
    abandon: (e) => {
      session.abandon(e instanceof SeamError ? e : new SeamError("unavailable", String(e)));
      close();
    },
    detach: () => {
      session.detach();
      close();
    },
    close,
  };
}

/** The policy the last shard samples by; `generated`: tokens sent before (a repair's route counts them). */
function samplingOf(req: GenerationRequest, generated: readonly number[]): SamplingPolicy {
  return {
    temperature: req.temperature,
    topK: req.topK,
    topP: req.topP,
    seed: req.seed,
    minP: req.minP,
    presencePenalty: req.presencePenalty,
    frequencyPenalty: req.frequencyPenalty,
    repeatPenalty: req.repeatPenalty,
    logitBias: req.logitBias,
    history: [...generated],
    logprobs: req.logprobs,
    topLogprobs: req.topLogprobs,
    grammar: req.grammar,
  };
}

/** A step's logprobs as OpenAI shows them: each token as its text and its UTF-8 bytes. */
const utf8 = new TextEncoder();

function tokenLogprobs(tok: Tokenizer, r: StepReply): TokenLogprobs {
  const entry = (token: number, logprob: number) => {
    const text = tok.piece(token);
    return { token: text, bytes: [...utf8.encode(text)], logprob };
  };
  return { ...entry(r.token, r.logprob ?? 0), top: (r.top ?? []).map((t) => entry(t.token, t.logprob)) };
}
