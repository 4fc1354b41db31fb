// One generation for the gateway: the prompt through a route the tracker handed out, tokens
// turned into text (held back at a possible stop sequence or a split UTF-8 character), and
// the session released or cancelled.
import { ConnectError } from "@connectrpc/connect";
import type { Tokenizer } from "../../src/engine/tokenizer.ts";
import { ApiError, type GenerationRequest, RateLimited } from "../../src/gateway/openai.ts";
import { ClientLeft, QueueRefused } from "../../src/gateway/admission.ts";
import { StopMatcher } from "../../src/gateway/stop.ts";
import { GenerationTelemetry } from "../../src/gateway/telemetry.ts";
import { contextCap, contextWindow } from "../../src/route/context-window.ts";
import { RouteSession } from "../../src/route/route-session.ts";
import { SeamError } from "../../src/seam/errors.ts";
import type { Dialer } from "../seam/dialer.ts";
import type { RouteLease } from "./route-gate.ts";
import type { NodeWatch } from "../../src/gateway/node-watch.ts";
import type { ActiveRoutes } from "../../src/gateway/active-routes.ts";

/** A step in flight this long (or 4 usual steps) through a node that left: the route is stuck. */
const STUCK_MS = 2_000;

export interface GenerationContext {
  readonly tokenizer: Tokenizer;
  readonly dialer: Dialer;
  readonly artifact: Uint8Array;
  readonly nCtxTrain: number;
  /** the tracker's word on the nodes of open sessions */
  readonly watch: NodeWatch;
  /** sessions now, by route (the network page) */
  readonly routes: ActiveRoutes;
}

export interface Generated {
  readonly text: string;
  readonly finishReason: "stop" | "length";
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly telemetry: GenerationTelemetry;
}

export function promptTokens(tok: Tokenizer, req: GenerationRequest): Int32Array {
  if (req.kind === "chat") {
    if (!tok.chatTemplate) {
      throw new ApiError(
        400,
        "this model has no chat template; use /v1/completions",
        "invalid_request_error",
      );
    }
    return tok.tokenize(tok.applyChat(req.messages!), { addSpecial: true, parseSpecial: true });
  }
  return tok.tokenize(req.prompt!, { addSpecial: true, parseSpecial: false });
}

/** Maps a route failure to the OpenAI error a client sees. */
export function routeError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof QueueRefused) return new RateLimited(e.message, e.retryAfterS);
  if (e instanceof ClientLeft) return new ApiError(499, e.message, "server_error", "cancelled");
  if (e instanceof ConnectError) {
    return new ApiError(503, `no route: ${e.rawMessage}`, "server_error", "no_route");
  }
  if (e instanceof SeamError) {
    if (e.code === "kv_full" || e.code === "overloaded") {
      return new ApiError(503, e.message, "server_error", e.code);
    }
    if (e.code === "cancelled") return new ApiError(499, e.message, "server_error", "cancelled");
    return new ApiError(502, `the route failed: ${e.code}: ${e.message}`, "server_error", "route_failed");
  }
  return new ApiError(500, e instanceof Error ? e.message : String(e), "server_error");
}

/**
 * Generates on the lease's route; `onText` gets each releasable piece. Cancels the route when
 * `signal` aborts. The caller ends the lease.
 */
export async function generate(
  ctx: GenerationContext,
  lease: Pick<RouteLease, "sessionId" | "route">,
  req: GenerationRequest,
  ids: Int32Array,
  signal: AbortSignal,
  onText: (piece: string) => void | Promise<void>,
): Promise<Generated> {
  const { sessionId, route } = lease;
  const window = contextWindow(
    ids.length,
    req.maxNewTokens,
    contextCap(ctx.nCtxTrain, route.maxSessionCells),
  );
  if ("refused" in window) {
    throw new ApiError(400, window.refused, "invalid_request_error", "context_length_exceeded", "max_tokens");
  }
  if (signal.aborted) throw new SeamError("cancelled", "the client went away");
  const telemetry = new GenerationTelemetry(route.name);
  const session = await RouteSession.open(
    ctx.dialer.dial,
    route.hops.map((h) => ({ url: h.url, range: h.range!, ticket: h.routeTicket })),
    {
      sessionId,
      epoch: route.epoch,
      artifactSha256: ctx.artifact,
      sampling: { temperature: req.temperature, topK: req.topK, topP: req.topP, seed: req.seed },
      kvCells: window.kvCells,
      // the tracker's choice for this route (q8 rows through the relay)
      compression: route.seamCompression,
      // the prompt follows OPEN at once: the OPEN round trip leaves TTFT
      pipelineOpen: true,
    },
  );
  const abort = () => void session.cancel();
  signal.addEventListener("abort", abort);
  // a node of the route that left the tracker ends the session, even if its seam said
  // nothing, once the route is stuck: a step waiting far longer than steps take here
  const closeRoute = ctx.routes.open(route.name);
  const unwatch = ctx.watch.watch(route.hops.map((h) => h.node), (node) => {
    const { waitingMs, usualStepMs } = session.stalled();
    if (waitingMs >= Math.max(STUCK_MS, 4 * usualStepMs)) {
      session.abandon(new SeamError("unavailable", `node ${node} left the network`));
    }
  });
  if (signal.aborted) abort(); // the client left while the session opened
  const tok = ctx.tokenizer;
  const out: number[] = [];
  const stop = new StopMatcher(req.stop);
  // text of out[0, base), which ends on a whole character: each token decodes only what is new
  let clean = "";
  let base = 0;
  let shown = "";
  const show = async (piece: string) => {
    shown += piece;
    await onText(piece);
  };
  let finishReason: "stop" | "length" = "length";
  let hitStop = false;
  try {
    // a session whose KV cells ran out (its own cap, or the node's pool ran short and it gave
    // way) ends like one that reached max_tokens: finish_reason length, the text so far
    let kvEnded = false;
    try {
      for await (const r of session.generate(ids, window.newTokens, (t) => tok.isEndOfGeneration(t))) {
        if (signal.aborted) throw new SeamError("cancelled", "the client went away");
        telemetry.step(r.telemetry);
        if (tok.isEndOfGeneration(r.token)) {
          finishReason = "stop";
          break;
        }
        out.push(r.token);
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
    } catch (e) {
      if (!(e instanceof SeamError && e.code === "context_full")) throw e;
      kvEnded = true;
      finishReason = "length";
    }
    if (!hitStop) {
      const rest = stop.flush();
      if (rest) await show(rest);
    }
    if (kvEnded) await session.cancel();
    else await session.release();
  } catch (e) {
    await session.cancel();
    throw e;
  } finally {
    signal.removeEventListener("abort", abort);
    unwatch();
    closeRoute();
  }
  return {
    // what was shown, and (without a stop) a character the stream ended inside of
    text: hitStop || base === out.length ? shown : shown + tok.detokenize(out.slice(base)),
    finishReason,
    promptTokens: ids.length,
    completionTokens: out.length,
    telemetry,
  };
}
