// The gateway: the OpenAI API on hono. It tokenizes with the model's own tokenizer and
// chat template, asks the tracker for a route (waiting in a fair queue while every route is
// busy), drives it, streams SSE, and reports Generation Telemetry in each response and on
// /metrics.
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { ApiError, type GenerationRequest, parseRequest, RateLimited } from "../../src/gateway/openai.ts";
import { type ClientLimitOptions, ClientLimits, NO_CLIENT_LIMITS } from "../../src/gateway/client-limits.ts";
import { type AdmissionOptions, DEFAULT_ADMISSION } from "../../src/gateway/admission.ts";
import { NativeTokenizer } from "../engine/native/native-tokenizer.ts";
import { fileFacts } from "../model/facts.ts";
import { artifactManifest } from "../artifacts/manifest.ts";
import { artifactRoutes } from "../artifacts/routes.ts";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { headerGraphShape } from "../../src/gguf/graph-shape.ts";
import { chatPageRoutes } from "./chat-page.ts";
import { type VolunteerOptions, volunteerRoutes } from "./volunteer.ts";
import { trackerClient } from "../tracker/client.ts";
import { Dialer } from "../seam/dialer.ts";
import { log } from "../log/log.ts";
import { NodeWatch } from "../../src/gateway/node-watch.ts";
import { ActiveRoutes } from "../../src/gateway/active-routes.ts";
import { offeredContext } from "../../src/route/context-window.ts";
import { networkPageRoutes } from "./network-page.ts";
import { generate, type GenerationContext, promptTokens, routeError } from "./generate.ts";
import { Metrics } from "./metrics.ts";
import { RouteGate } from "./route-gate.ts";

/** The admission line repairs wait in, beside each client key's line (and the keyless one). */
const REPAIR_LINE = "repair:";
import type { CertPair } from "../tls/certs.ts";
import { serveHttp } from "../http/serve-http.ts";
import { addressGroup } from "../../src/gateway/address-group.ts";

export interface GatewayOptions {
  readonly modelPath: string;
  readonly modelName: string;
  readonly trackerUrl: string;
  /** when any, every /v1 request needs one as a bearer token */
  readonly apiKeys: readonly string[];
  readonly relay?: { url: string; token: string };
  readonly host: string;
  readonly port: number;
  /** serve the volunteer page and its API (needs the relay's secret and the node token) */
  readonly volunteer?: VolunteerOptions;
  /** the queue of requests waiting for a busy route (default: 64 waiting, 30 s each) */
  readonly admission?: Partial<AdmissionOptions>;
  /** a session whose route lost a node and got no new one this long after ends (default 30 s) */
  readonly repairDeadlineMs?: number;
  /** false: every repair re-prefills the whole new route (the lost-hop rebuild off, to compare) */
  readonly repairResume?: boolean;
  /** what one client (its API key, else its address) may take (default: no limit) */
  readonly clientLimits?: ClientLimitOptions;
  /** serve HTTPS with this certificate */
  readonly tls?: CertPair;
}

const now = () => Math.floor(Date.now() / 1000);

/** The client's address, from what Deno.serve hands the app (hono's env). */
const remoteHost = (env: unknown) => {
  const addr = (env as Partial<Deno.ServeHandlerInfo> | undefined)?.remoteAddr;
  return addr && "hostname" in addr ? addr.hostname : "?";
};

export async function startGateway(o: GatewayOptions) {
  const tokenizer = await NativeTokenizer.load(o.modelPath);
  const facts = await fileFacts(o.modelPath);
  // the gateway is its model's origin: manifest and bytes for shards to download
  const manifest = await artifactManifest(o.modelPath);
  const artifact = hexToBytes(manifest.artifact);
  const tracker = trackerClient(o.trackerUrl);
  const dialer = await Dialer.connect(o.relay);
  const gate = new RouteGate(tracker.client, artifact, { ...DEFAULT_ADMISSION, ...o.admission });
  const limits = new ClientLimits(o.clientLimits ?? NO_CLIENT_LIMITS);
  const ctx: GenerationContext = {
    tokenizer,
    dialer,
    artifact,
    nCtxTrain: facts.nCtxTrain,
    routes: new ActiveRoutes(),
    watch: new NodeWatch(async (nodes) => {
      const r = await tracker.client.nodes({ nodes: [...nodes] }, { timeoutMs: 5000 });
      return new Set(r.nodes.filter((n) => n.live).map((n) => n.node));
    }),
    repair: {
      // repairs wait in a line of their own: a turn comes soon even behind a long queue
      reroute: (ask, signal) => gate.acquire(REPAIR_LINE, signal, ask),
      dead: async (nodes) => {
        const r = await tracker.client.nodes({ nodes: [...nodes] }, { timeoutMs: 5000 }).catch(() =>
          undefined
        );
        // a node the tracker has forgotten is gone too
        const live = new Set(r?.nodes.filter((n) => n.live).map((n) => n.node) ?? nodes);
        return nodes.filter((n) => !live.has(n));
      },
      deadlineMs: o.repairDeadlineMs ?? 30_000,
      resume: o.repairResume !== false,
    },
  };
  const metrics = new Metrics();
  const app = new Hono();

  app.onError((e, c) => {
    const err = e instanceof ApiError ? e : routeError(e);
    if (err instanceof RateLimited) c.header("Retry-After", String(err.retryAfterS));
    return c.json(err.body(), err.status as 400);
  });
  app.notFound((c) => c.json(new ApiError(404, `no route ${c.req.method} ${c.req.path}`).body(), 404));

  app.get("/health", async (c) => {
    const { nodes } = await tracker.client.nodes({}, { timeoutMs: 5000 }).catch(() => ({ nodes: [] }));
    const admitted = nodes.filter((n) => n.live && n.admission === "admitted").length;
    return c.json({ ok: true, model: o.modelName, nodes_admitted: admitted });
  });
  app.route("/", artifactRoutes([{ path: o.modelPath, manifest }]));
  await chatPageRoutes(app);
  const model = {
    manifest,
    kv: kvShape(facts.header).layers,
    graph: headerGraphShape(facts.header),
    name: o.modelName,
  };
  await networkPageRoutes(app, { model, tracker: tracker.client, routes: ctx.routes });
  if (o.volunteer) await volunteerRoutes(app, o.volunteer, model, tracker.client);
  app.get(
    "/metrics",
    (c) => c.text(metrics.text(gate.admission.stats()), 200, { "content-type": "text/plain; version=0.0.4" }),
  );

  app.use("/v1/*", async (c, next) => {
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
  });

  const started = Math.floor(Date.now() / 1000);
  app.get("/v1/models", async (c) => {
    const { nodes } = await tracker.client.nodes({}, { timeoutMs: 5000 }).catch(() => ({ nodes: [] }));
    const shards = nodes.filter((n) => n.live && n.admission === "admitted" && n.shard?.range).map((n) => ({
      start: n.shard!.range!.start,
      end: n.shard!.range!.end,
      sessionCells: n.shard!.sessionCells,
    }));
    return c.json({
      object: "list",
      data: [{
        id: o.modelName,
        object: "model",
        created: started,
        owned_by: "strata",
        // the longest prompt + completion a route offers now (0: no complete route yet)
        context_length: offeredContext(shards, facts.nLayer, facts.nCtxTrain),
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
    if (req.model !== o.modelName) {
      metrics.request(kind, 404);
      throw new ApiError(
        404,
        `The model '${req.model}' does not exist`,
        "invalid_request_error",
        "model_not_found",
        "model",
      );
    }
    const ids = promptTokens(tokenizer, req);
    return req.stream ? await stream(c, req, ids, key, charge) : await complete(c, req, ids, key, charge);
  }

  const chunk = (
    req: GenerationRequest,
    id: string,
    created: number,
    text: string | null,
    finish: string | null,
    role = false,
  ) =>
    req.kind === "chat"
      ? {
        id,
        object: "chat.completion.chunk",
        created,
        model: o.modelName,
        choices: [{
          index: 0,
          delta: text === null ? {} : role ? { role: "assistant", content: text } : { content: text },
          finish_reason: finish,
        }],
      }
      : {
        id,
        object: "text_completion",
        created,
        model: o.modelName,
        choices: [{ index: 0, text: text ?? "", finish_reason: finish, logprobs: null }],
      };

  /** Whose line a request waits in: its API key when the gateway checks keys, else everyone's. */
  const apiKeyOf = (auth: string | undefined) => {
    const key = auth?.startsWith("Bearer ") ? auth.slice(7) : "";
    return o.apiKeys.includes(key) ? key : "";
  };

  /** A route, after a wait in the queue if every one is busy; a refusal counts in /metrics. */
  async function lease(kind: string, key: string, signal: AbortSignal, avoid: string[] = []) {
    try {
      return await gate.acquire(key, signal, { avoid });
    } catch (e) {
      metrics.request(kind, routeError(e).status);
      throw e;
    }
  }

  // The route is taken before the event stream starts: a refusal is a real 429 with
  // Retry-After (clients retry those), and the client sees no 200 it must then take back.
  async function stream(
    // deno-lint-ignore no-explicit-any
    c: any,
    req: GenerationRequest,
    ids: Int32Array,
    key: string,
    charge: (tokens: number) => void,
  ) {
    const held = await lease(req.kind, key, c.req.raw.signal);
    const id = `${req.kind === "chat" ? "chatcmpl" : "cmpl"}-${crypto.randomUUID()}`;
    const created = now();
    return streamSSE(c, async (sse) => {
      const gone = new AbortController();
      sse.onAbort(() => gone.abort());
      let used = ids.length;
      try {
        if (req.kind === "chat") {
          // not awaited: this first write waits until the server starts sending the response,
          // and the route need not wait with it (writes still go out in order)
          void sse.writeSSE({ data: JSON.stringify(chunk(req, id, created, "", null, true)) });
        }
        const g = await generate(
          ctx,
          held,
          req,
          ids,
          gone.signal,
          (piece) => sse.writeSSE({ data: JSON.stringify(chunk(req, id, created, piece, null)) }),
        );
        const usage = {
          prompt_tokens: g.promptTokens,
          completion_tokens: g.completionTokens,
          total_tokens: g.promptTokens + g.completionTokens,
        };
        used = usage.total_tokens;
        const summary = g.telemetry.summary();
        await sse.writeSSE({
          data: JSON.stringify({
            ...chunk(req, id, created, null, g.finishReason),
            strata: summary,
          }),
        });
        if (req.includeUsage) {
          await sse.writeSSE({
            data: JSON.stringify({ ...chunk(req, id, created, null, null), choices: [], usage }),
          });
        }
        metrics.request(req.kind, 200);
        metrics.generation(summary, g.promptTokens, g.completionTokens);
      } catch (e) {
        const err = routeError(e);
        metrics.request(req.kind, err.status);
        log.warn("generation failed", { error: err.message });
        if (!gone.signal.aborted) await sse.writeSSE({ data: JSON.stringify(err.body()) });
      } finally {
        charge(used);
        await held.end();
      }
      if (!gone.signal.aborted) await sse.writeSSE({ data: "[DONE]" });
    });
  }

  async function complete(
    // deno-lint-ignore no-explicit-any
    c: any,
    req: GenerationRequest,
    ids: Int32Array,
    key: string,
    charge: (tokens: number) => void,
  ) {
    // aborts when the client disconnects (deno.json opts out of Deno.serve's legacy abort on
    // success): its route is cancelled, or it leaves the queue
    const gone: AbortSignal = c.req.raw.signal;
    // nothing has reached the client yet: a route that fails is retried once on other nodes
    let g;
    let attempts = 0;
    const avoid: string[] = [];
    for (let attempt = 0;; attempt++) {
      attempts = attempt + 1;
      const held = await lease(req.kind, key, gone, avoid);
      try {
        g = await generate(ctx, held, req, ids, gone, () => {});
        break;
      } catch (e) {
        const err = routeError(e);
        if (attempt > 0 || err.code !== "route_failed") {
          metrics.request(req.kind, err.status);
          throw err;
        }
        avoid.push(...(await failedNodes(err.message)));
        log.warn("route failed, retrying on other nodes", { error: err.message, avoid });
      } finally {
        await held.end();
      }
    }
    charge(g.promptTokens + g.completionTokens);
    const summary = { ...g.telemetry.summary(), attempts };
    metrics.request(req.kind, 200);
    metrics.generation(summary, g.promptTokens, g.completionTokens);
    const usage = {
      prompt_tokens: g.promptTokens,
      completion_tokens: g.completionTokens,
      total_tokens: g.promptTokens + g.completionTokens,
    };
    const id = `${req.kind === "chat" ? "chatcmpl" : "cmpl"}-${crypto.randomUUID()}`;
    const choice = req.kind === "chat"
      ? { index: 0, message: { role: "assistant", content: g.text }, finish_reason: g.finishReason }
      : { index: 0, text: g.text, finish_reason: g.finishReason, logprobs: null };
    return c.json({
      id,
      object: req.kind === "chat" ? "chat.completion" : "text_completion",
      created: now(),
      model: o.modelName,
      choices: [choice],
      usage,
      strata: summary,
    });
  }

  /** Nodes the tracker no longer sees as live, or named in the failure. */
  async function failedNodes(message: string): Promise<string[]> {
    const { nodes } = await tracker.client.nodes({}, { timeoutMs: 5000 }).catch(() => ({ nodes: [] }));
    return nodes.filter((n) => !n.live || n.urls.some((u) => message.includes(u))).map((n) => n.node);
  }

  const server = serveHttp(app.fetch, o.host, o.port, o.tls);
  const url = server.url;
  log.info("gateway ready", { url, model: o.modelName });
  return {
    url,
    close: async () => {
      gate.admission.close();
      ctx.watch.close();
      await server.close();
      dialer.close();
      tracker.close();
      tokenizer.close();
    },
  };
}
