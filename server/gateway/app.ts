// The gateway: the OpenAI API on hono. It tokenizes with the model's own tokenizer and
// chat template, asks the tracker for a route (waiting in a fair queue while every route is
// busy), drives it, streams SSE, and reports Generation Telemetry in each response and on
// /metrics.
import { type Context, Hono, type Next } from "hono";
import { cors } from "hono/cors";
import { type SSEStreamingApi, streamSSE } from "hono/streaming";
import { ApiError, type GenerationRequest, parseRequest, RateLimited } from "../../src/gateway/openai.ts";
import { type ClientLimitOptions, ClientLimits, NO_CLIENT_LIMITS } from "../../src/gateway/client-limits.ts";
import { DEFAULT_REQUEST_QUEUE, type RequestQueueOptions } from "../../src/gateway/request-queue.ts";
import { NativeTokenizer } from "../engine/native/native-tokenizer.ts";
import { headerFacts } from "../model/facts.ts";
import type { ModelHeader } from "../artifacts/model-header.ts";
import { artifactManifest } from "../artifacts/manifest.ts";
import { artifactRoutes } from "../artifacts/routes.ts";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { headerGraphShape } from "../../src/gguf/graph-shape.ts";
import { chatPageRoutes } from "./chat-page.ts";
import { type VolunteerOptions, volunteerRoutes } from "./volunteer.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { Dialer } from "../../node-apis/seam/dialer.ts";
import { log, logRelay } from "../log/log.ts";
import { NodeWatch } from "../../src/gateway/node-watch.ts";
import { ActiveRoutes } from "../../src/gateway/active-routes.ts";
import { networkStatus } from "../../src/gateway/network-status.ts";
import { LoadHistory } from "../../src/gateway/load-history.ts";
import { networkPageRoutes } from "./network-page.ts";
import { tokenRoutes } from "./token-routes.ts";
import { generate, type GenerationContext, routeWindow } from "../../src/gateway/generation.ts";
import { planPrompt, type PromptPlan } from "../../src/gateway/prompt-plan.ts";
import { routeError } from "../../src/gateway/route-errors.ts";
import { PrefixAffinity } from "../../src/gateway/prefix-affinity.ts";
import { choiceAnswer, ResponseShape, usageOf } from "../../src/gateway/responses.ts";
import { Metrics } from "./metrics.ts";
import { nodePrefixLines } from "./node-prefix-metrics.ts";
import { RouteGate } from "./route-gate.ts";
import type { RouteLease } from "../../src/gateway/lease.ts";

/** The request queue's line repairs wait in, beside each client key's line (and the keyless one). */
const REPAIR_LINE = "repair:";
/** How long a session whose route broke waits for another (--repair-deadline-ms). */
const REPAIR_DEADLINE_MS = 30_000;
import type { CertPair } from "../../node-apis/tls/certs.ts";
import { serveHttp } from "../http/serve-http.ts";
import { addressGroup } from "../../src/gateway/address-group.ts";

export interface GatewayOptions {
  /** its header and manifest: the gateway tokenizes with it, never loads a weight */
  readonly model: ModelHeader;
  readonly trackerUrl: string;
  /** when any, every /v1 request needs one as a bearer token */
  readonly apiKeys: readonly string[];
  readonly relay?: { url: string; token: string };
  readonly host: string;
  readonly port: number;
  /** serve the volunteer page and its API (needs the relay's secret and the node token) */
  readonly volunteer?: VolunteerOptions;
  /** the queue of requests waiting for a busy route (default: 64 waiting, 30 s each) */
  readonly admission?: Partial<RequestQueueOptions>;
  /** a session whose route lost a node and got no new one this long after ends (default 30 s) */
  readonly repairDeadlineMs?: number;
  /** false: every repair re-prefills the whole new route (the lost-hop rebuild off, to compare) */
  readonly repairResume?: boolean;
  /** false: prompts are prefilled whole, and shards keep no session's KV (GenerationContext.prefixReuse) */
  readonly prefixReuse?: boolean;
  /** mirror the KV of prompts of at least this many positions to standby nodes (0 or none: off) */
  readonly kvMirror?: number;
  /** what one client (its API key, else its address) may take (default: no limit) */
  readonly clientLimits?: ClientLimitOptions;
  /** serve HTTPS with this certificate */
  readonly tls?: CertPair;
  /** browser origins that may call the API (CORS; "*" for any) */
  readonly corsOrigins?: readonly string[];
}

/** The client's address, from what Deno.serve hands the app (hono's env). */
const remoteHost = (env: unknown) => {
  const addr = (env as Partial<Deno.ServeHandlerInfo> | undefined)?.remoteAddr;
  return addr && "hostname" in addr ? addr.hostname : "?";
};

export async function startGateway(o: GatewayOptions) {
  if (!o.model.headerFile) throw new Error("the gateway's model needs its header file (openModelHeader)");
  const tokenizer = await NativeTokenizer.load(o.model.headerFile);
  const facts = headerFacts(o.model.header);
  const src = o.model.source;
  // with the GGUF at hand the gateway is its model's origin too (manifest and bytes for shards);
  // from an origin, tabs download from that origin
  const manifest = "path" in src ? await artifactManifest(src.path) : src.manifest;
  const artifact = hexToBytes(manifest.artifact);
  const tracker = trackerClient(o.trackerUrl);
  const dialer = await Dialer.connect(o.relay, undefined, logRelay);
  const gate = new RouteGate(tracker.client, artifact, { ...DEFAULT_REQUEST_QUEUE, ...o.admission });
  const limits = new ClientLimits(o.clientLimits ?? NO_CLIENT_LIMITS);
  const history = new LoadHistory();
  const ctx: GenerationContext = {
    history,
    prefixReuse: o.prefixReuse,
    affinity: o.prefixReuse === false ? undefined : new PrefixAffinity(),
    mirror: o.kvMirror
      ? { standby: (work, other) => gate.standby(work, other), minPositions: o.kvMirror }
      : undefined,
    tokenizer,
    dial: dialer.dial,
    log: (message, fields) => log.info(message, fields),
    artifact,
    nCtxTrain: facts.nCtxTrain,
    routes: new ActiveRoutes(),
    watch: new NodeWatch(async (nodes) => {
      const r = await tracker.client.nodes({ nodes: [...nodes] }, { timeoutMs: 5000 });
      return new Set(r.nodes.filter((n) => n.live).map((n) => n.node));
    }),
    repair: {
      // repairs wait in a line of their own: a turn comes soon even behind a long queue
      // within the repair's own deadline, a moment without any complete route is waited out
      reroute: (ask, signal) =>
        gate.acquire(REPAIR_LINE, signal, ask, [], o.repairDeadlineMs ?? REPAIR_DEADLINE_MS),
      dead: async (nodes) => {
        const r = await tracker.client.nodes({ nodes: [...nodes] }, { timeoutMs: 5000 }).catch(() =>
          undefined
        );
        // a node the tracker has forgotten is gone too
        const live = new Set(r?.nodes.filter((n) => n.live).map((n) => n.node) ?? nodes);
        return nodes.filter((n) => !live.has(n));
      },
      deadlineMs: o.repairDeadlineMs ?? REPAIR_DEADLINE_MS,
      resume: o.repairResume !== false,
    },
  };
  const metrics = new Metrics();
  // the request queue's depth, a second at a time, beside what generations record
  const sampleQueue = setInterval(() => history.queue(Date.now(), gate.queue.stats().waiting), 1000);
  const app = new Hono();

  app.onError((e, c) => {
    const err = e instanceof ApiError ? e : routeError(e);
    if (err instanceof RateLimited) c.header("Retry-After", String(err.retryAfterS));
    return c.json(err.body(), err.status as 400);
  });
  app.notFound((c) => c.json(new ApiError(404, `no route ${c.req.method} ${c.req.path}`).body(), 404));

  /** The tracker's nodes now, and what they can serve (undefined: the tracker did not answer). */
  const status = async () => {
    const r = await tracker.client.nodes({}, { timeoutMs: 5000 }).catch(() => undefined);
    return r && networkStatus(r.nodes, facts.nLayer, facts.nCtxTrain);
  };

  // 200 only when a client's request could be served now: the tracker answers and a complete
  // route of admitted, live nodes exists; 503 with the reason otherwise (load balancers ask this)
  app.get("/health", async (c) => {
    const s = await status();
    const body = { model: o.model.name, nodes_admitted: s?.nodesAdmitted ?? 0 };
    if (!s) return c.json({ ok: false, ...body, reason: "the tracker does not answer" }, 503);
    if (s.contextLength === 0) {
      return c.json({ ok: false, ...body, reason: "no complete route of admitted, live nodes" }, 503);
    }
    return c.json({ ok: true, ...body, context_length: s.contextLength, free_sessions: s.freeSessions });
  });
  if ("path" in src) app.route("/", artifactRoutes([{ path: src.path, manifest }]));
  await chatPageRoutes(app);
  const model = {
    manifest,
    kv: kvShape(facts.header).layers,
    graph: headerGraphShape(facts.header),
    name: o.model.name,
  };
  await networkPageRoutes(app, { model, tracker: tracker.client, routes: ctx.routes, history });
  if (o.volunteer) {
    const origin = "url" in src ? src.url : undefined;
    await volunteerRoutes(app, o.volunteer, model, tracker.client, origin);
  }
  app.get(
    "/metrics",
    async (c) =>
      c.text(
        metrics.text(gate.queue.stats()) +
          (await nodePrefixLines(tracker.client, dialer.grpc)).map((l) => `${l}\n`).join(""),
        200,
        { "content-type": "text/plain; version=0.0.4" },
      ),
  );

  const apiPaths = ["/v1/*", "/tokenize", "/detokenize"];
  if (o.corsOrigins?.length) {
    const origins = [...o.corsOrigins];
    for (const path of apiPaths) {
      app.use(path, cors({ origin: origins.includes("*") ? "*" : origins, maxAge: 600 }));
    }
  }
  for (const path of apiPaths) app.use(path, requireKey);

  tokenRoutes(app, tokenizer);

  async function requireKey(c: Context, next: Next) {
    if (o.apiKeys.length === 0) return await next();
    const auth = c.req.header("authorization") ?? "";
    const key = auth.startsWith("Bearer ") ? auth.slice(7) : "";
    if (!key || !o.apiKeys.includes(key)) {
      const msg = key
        ? "Incorrect API key provided."
        : "You didn't provide an API key (Authorization: Bearer …).";
      return c.json(new ApiError(401, msg, "invalid_request_error", "invalid_api_key").body(), 401);
    }
    await next();
  }

  const started = Math.floor(Date.now() / 1000);
  app.get("/v1/models", async (c) => {
    const s = await status();
    return c.json({
      object: "list",
      data: [{
        id: o.model.name,
        object: "model",
        created: started,
        owned_by: "strata",
        // the longest prompt + completion a route offers now (0: no complete route yet)
        context_length: s?.contextLength ?? 0,
        // what the network could take now: sessions it could open, its admitted nodes
        free_sessions: s?.freeSessions ?? 0,
        nodes_admitted: s?.nodesAdmitted ?? 0,
      }],
    });
  });

  for (const [path, kind] of [["/v1/chat/completions", "chat"], ["/v1/completions", "completion"]] as const) {
    app.post(path, async (c) => {
      // the client's own limits come first, before its body is even read
      const key = apiKeyOf(c.req.header("authorization"));
      const client = key || `addr:${addressGroup(remoteHost(c.env))}`;
      const slot = limits.admit(client);
      if (!slot.ok) {
        metrics.request(kind, 429);
        throw new RateLimited(
          `Rate limit reached for this client: ${slot.why}. Try again in ${slot.retryAfterS} s.`,
          slot.retryAfterS,
        );
      }
      try {
        return await answer(c, kind, key, slot.release);
      } catch (e) {
        slot.release(0);
        throw e;
      }
    });
  }

  /** A request within its client's limits; `charge` takes the tokens it used, once. */
  // deno-lint-ignore no-explicit-any
  async function answer(c: any, kind: "chat" | "completion", key: string, charge: (tokens: number) => void) {
    let body: unknown;
    try {
      body = await c.req.json();
    } catch {
      metrics.request(kind, 400);
      throw new ApiError(400, "We could not parse the JSON body of your request.", "invalid_request_error");
    }
    const req = parseRequest(kind, body);
    if (req.model !== o.model.name) {
      metrics.request(kind, 404);
      throw new ApiError(
        404,
        `The model '${req.model}' does not exist`,
        "invalid_request_error",
        "model_not_found",
        "model",
      );
    }
    const plan = planPrompt(tokenizer, req);
    // the nodes that kept the longest prefix of this prompt, as far as this gateway knows
    const prefer = await ctx.affinity?.nodesFor(plan.ids) ?? [];
    // the plan's grammar, and the stops its format adds (the client's own come first)
    const constrained = { ...req, grammar: plan.grammar, stop: [...req.stop, ...plan.stops] };
    return req.stream
      ? await stream(c, constrained, plan, key, charge, prefer)
      : await complete(c, constrained, plan, key, charge, prefer);
  }

  /** Whose line a request waits in: its API key when the gateway checks keys, else everyone's. */
  const apiKeyOf = (auth: string | undefined) => {
    const key = auth?.startsWith("Bearer ") ? auth.slice(7) : "";
    return o.apiKeys.includes(key) ? key : "";
  };

  /** A route, after a wait in the queue if every one is busy; a refusal counts in /metrics. */
  async function lease(
    kind: string,
    key: string,
    signal: AbortSignal,
    prefer: readonly string[],
    avoid: string[] = [],
  ) {
    try {
      return await gate.acquire(key, signal, { avoid }, prefer);
    } catch (e) {
      metrics.request(kind, routeError(e).status);
      throw e;
    }
  }

  /** Choice i of a request with `n` > 1 samples with seed + i: each alone gives the same answer. */
  const choiceRequests = (req: GenerationRequest) =>
    Array.from({ length: req.n }, (_, i) => ({ ...req, seed: req.seed + BigInt(i) }));

  // The routes are taken before the event stream starts: a refusal is a real 429 with
  // Retry-After (clients retry those), a prompt past a route's context a real 400, and the
  // client sees no 200 it must then take back.
  async function stream(
    // deno-lint-ignore no-explicit-any
    c: any,
    req: GenerationRequest,
    plan: PromptPlan,
    key: string,
    charge: (tokens: number) => void,
    prefer: readonly string[],
  ) {
    const ids = plan.ids;
    const held: RouteLease[] = [];
    try {
      for (const _ of choiceRequests(req)) {
        held.push(await lease(req.kind, key, c.req.raw.signal, prefer));
        routeWindow(ctx, held[held.length - 1], ids, req);
      }
    } catch (e) {
      if (e instanceof ApiError && e.status === 400) metrics.request(req.kind, 400);
      await Promise.all(held.map((l) => l.end()));
      throw e;
    }
    const shape = new ResponseShape(req, o.model.name);
    const send = (sse: SSEStreamingApi, data: unknown) => sse.writeSSE({ data: JSON.stringify(data) });
    return streamSSE(c, async (sse) => {
      const gone = new AbortController();
      sse.onAbort(() => gone.abort());
      let used = 0;
      const usage = { prompt: ids.length, completion: 0, cached: 0 };
      try {
        await Promise.all(
          choiceRequests(req).map(async (one, index) => {
            used += ids.length;
            if (req.kind === "chat") {
              // not awaited: this first write waits until the server starts sending the response,
              // and the route need not wait with it (writes still go out in order)
              void send(sse, shape.chunk(index, "", null, { role: true }));
            }
            let offset = 0;
            const g = await generate(ctx, held[index], one, ids, gone.signal, (piece, logprobs) => {
              // the tool format's JSON is read once whole: calls or text go out at the end
              if (plan.answer.kind !== "text") return;
              const chunk = shape.chunk(index, piece, null, { logprobs, offset });
              offset += piece.length;
              return send(sse, chunk);
            });
            used += g.completionTokens;
            usage.completion += g.completionTokens;
            usage.cached = Math.max(usage.cached, g.cachedTokens);
            const a = choiceAnswer(g, plan.answer);
            if (a.toolCalls) await send(sse, shape.toolCallsChunk(index, a.toolCalls));
            else if (plan.answer.kind !== "text" && a.text) await send(sse, shape.chunk(index, a.text, null));
            const summary = g.telemetry.summary();
            await send(sse, { ...shape.chunk(index, null, a.finishReason), strata: summary });
            metrics.generation(summary, g.promptTokens, g.completionTokens);
          }),
        );
        if (req.includeUsage) {
          await send(sse, shape.usageChunk(usageOf(usage.prompt, usage.completion, usage.cached)));
        }
        metrics.request(req.kind, 200);
      } catch (e) {
        const err = routeError(e);
        metrics.request(req.kind, err.status);
        log.warn("generation failed", { error: err.message });
        // the other choices end with this one
        gone.abort();
        if (!sse.aborted) await send(sse, err.body());
      } finally {
        charge(used);
        await Promise.all(held.map((l) => l.end()));
      }
      if (!sse.aborted) await sse.writeSSE({ data: "[DONE]" });
    });
  }

  async function complete(
    // deno-lint-ignore no-explicit-any
    c: any,
    req: GenerationRequest,
    plan: PromptPlan,
    key: string,
    charge: (tokens: number) => void,
    prefer: readonly string[],
  ) {
    const ids = plan.ids;
    // aborts when the client disconnects (deno.json opts out of Deno.serve's legacy abort on
    // success): its routes are cancelled, or it leaves the queue
    const gone: AbortSignal = c.req.raw.signal;
    const settled = await Promise.allSettled(
      choiceRequests(req).map((one) => completeOne(one, ids, key, gone, prefer)),
    );
    const used = settled.reduce(
      (n, r) => n + (r.status === "fulfilled" ? ids.length + r.value.g.completionTokens : 0),
      0,
    );
    charge(used);
    const failed = settled.find((r) => r.status === "rejected");
    if (failed) {
      const err = routeError(failed.reason);
      metrics.request(req.kind, err.status);
      throw err;
    }
    const done = settled.map((r) =>
      (r as PromiseFulfilledResult<Awaited<ReturnType<typeof completeOne>>>).value
    );
    metrics.request(req.kind, 200);
    const summaries = done.map(({ g, attempts }) => {
      const summary = { ...g.telemetry.summary(), attempts };
      metrics.generation(summary, g.promptTokens, g.completionTokens);
      return summary;
    });
    const shape = new ResponseShape(req, o.model.name);
    const completion = done.reduce((n, { g }) => n + g.completionTokens, 0);
    return c.json({
      ...shape.completion(
        done.map(({ g }) => choiceAnswer(g, plan.answer)),
        usageOf(ids.length, completion, Math.max(...done.map(({ g }) => g.cachedTokens))),
      ),
      // one choice: its telemetry; several: each choice's
      strata: summaries.length === 1 ? summaries[0] : summaries,
    });
  }

  /** One choice of a request that does not stream: a route that fails first is retried once on other nodes. */
  async function completeOne(
    req: GenerationRequest,
    ids: Int32Array,
    key: string,
    gone: AbortSignal,
    prefer: readonly string[],
  ) {
    const avoid: string[] = [];
    for (let attempt = 0;; attempt++) {
      // a retry on other nodes prefers none
      const held = await lease(req.kind, key, gone, attempt === 0 ? prefer : [], avoid);
      try {
        return { g: await generate(ctx, held, req, ids, gone, () => {}), attempts: attempt + 1 };
      } catch (e) {
        const err = routeError(e);
        if (attempt > 0 || err.code !== "route_failed") throw err;
        avoid.push(...(await failedNodes(err.message)));
        log.warn("route failed, retrying on other nodes", { error: err.message, avoid });
      } finally {
        await held.end();
      }
    }
  }

  /** Nodes the tracker no longer sees as live, or named in the failure. */
  async function failedNodes(message: string): Promise<string[]> {
    const { nodes } = await tracker.client.nodes({}, { timeoutMs: 5000 }).catch(() => ({ nodes: [] }));
    return nodes.filter((n) => !n.live || n.urls.some((u) => message.includes(u))).map((n) => n.node);
  }

  const server = serveHttp(app.fetch, o.host, o.port, o.tls);
  const url = server.url;
  log.info("gateway ready", { url, model: o.model.name });
  return {
    url,
    close: async () => {
      clearInterval(sampleQueue);
      gate.queue.close();
      ctx.watch.close();
      await server.close();
      dialer.close();
      tracker.close();
      tokenizer.close();
    },
  };
}
