import { create } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it, vi } from "vitest";
import { HopSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { RouteSchema } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { generate, type GenerationContext, routeWindow } from "../../src/gateway/generation.ts";
import { planPrompt } from "../../src/gateway/prompt-plan.ts";
import type { GenerationRequest } from "../../src/gateway/openai.ts";
import { ActiveRoutes } from "../../src/gateway/active-routes.ts";
import { NodeWatch } from "../../src/gateway/node-watch.ts";
import { ShardNode } from "../../src/node/shard-node.ts";
import { RouteSession } from "../../src/route/route-session.ts";
import { routeError } from "../../src/gateway/route-errors.ts";
import { expectedToken, FakeEngine } from "../fakes/fake-engine.ts";
import { E_ACUTE_HEAD, EOS, FakeTokenizer } from "../fakes/fake-tokenizer.ts";
import { MemorySeams } from "../fakes/memory-seams.ts";
import { ARTIFACT, routeKey, signedHops } from "../fakes/route-keys.ts";

// millisecond tests: one that waits this long is stuck
vi.setConfig({ testTimeout: 5_000 });

const tok = new FakeTokenizer();
const nodes: ShardNode[] = [];
const watches: NodeWatch[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
  for (const w of watches.splice(0)) w.close();
});

/** A route of two fake shards (layers 0:2 and 2:4) over in-memory seams, and a lease on it. */
async function routeOf(o: { maxSessionCells?: number; kvCells?: number } = {}) {
  const seams = new MemorySeams();
  const { publicKey } = await routeKey();
  const ranges = [{ start: 0, end: 2 }, { start: 2, end: 4 }];
  const engines = ranges.map((range) => new FakeEngine({ range }));
  engines.forEach((e, i) => {
    const n = new ShardNode(e, {
      nodeId: `n${i}`,
      artifactSha256: ARTIFACT,
      routeKey: publicKey,
      dial: seams.dial,
      limits: { maxBatchTokens: 64, maxQueuedPerSession: 8, kvCells: o.kvCells ?? 256 },
      leaseMs: 60_000,
      parkMs: 0,
    });
    seams.listen(`http://n${i}`, n.serve);
    nodes.push(n);
  });
  const sessionId = crypto.randomUUID();
  const hops = await signedHops(ranges.map((range, i) => ({ url: `http://n${i}`, range })), sessionId);
  const route = create(RouteSchema, {
    epoch: 1n,
    name: "r0",
    maxSessionCells: o.maxSessionCells ?? 256,
    hops: hops.map((h, i) =>
      create(HopSchema, { url: h.url, range: h.range, routeTicket: h.ticket, node: `n${i}` })
    ),
  });
  const watch = new NodeWatch(() => Promise.resolve(new Set(["n0", "n1"])));
  watches.push(watch);
  const ctx: GenerationContext = {
    tokenizer: tok,
    dial: seams.dial,
    log: () => {},
    artifact: ARTIFACT,
    nCtxTrain: 4096,
    watch,
    routes: new ActiveRoutes(),
  };
  return { ctx, engines, seams, ranges, lease: { sessionId, route } };
}

const request = (o: Partial<GenerationRequest> = {}): GenerationRequest => ({
  kind: "completion",
  model: "fake",
  prompt: "hello there",
  temperature: 0,
  topP: 1,
  topK: 0,
  seed: 1n,
  stop: [],
  stream: false,
  includeUsage: false,
  minP: 0,
  presencePenalty: 0,
  frequencyPenalty: 0,
  repeatPenalty: 1,
  logitBias: {},
  logprobs: false,
  topLogprobs: 0,
  n: 1,
  tools: [],
  toolChoice: "none",
  parallelToolCalls: true,
  responseFormat: { type: "text" },
  ...o,
});

/** The fake route's greedy tokens after `ids`: each the fake logits' favourite, up to EOS or `max`. */
function greedy(ids: Int32Array, max: number): number[] {
  const out: number[] = [];
  let t = ids[ids.length - 1];
  for (let pos = ids.length - 1; out.length < max; pos++) {
    t = expectedToken(t, pos);
    if (t === EOS) break;
    out.push(t);
  }
  return out;
}

/** A prompt of letters whose greedy answer ends, at `max` tokens, on the first byte of "é". */
function promptEndingInSplitChar(max: number): string {
  for (let n = 0; n < 5000; n++) {
    const prompt = n.toString(26).replace(/./g, (d) => String.fromCharCode(0x61 + parseInt(d, 26)));
    const out = greedy(planPrompt(tok, request({ prompt })).ids, max);
    if (out.length === max && out[max - 1] === E_ACUTE_HEAD) return prompt;
  }
  throw new Error("no such prompt");
}

describe("generation: a prompt through a route of fake shards", () => {
  it("streams the route's greedy tokens as text and frees the session on every node", async () => {
    const { ctx, engines, lease } = await routeOf();
    const req = request({ maxNewTokens: 12 });
    const ids = planPrompt(tok, req).ids;
    const pieces: string[] = [];
    const g = await generate(ctx, lease, req, ids, new AbortController().signal, (p) => void pieces.push(p));
    const want = greedy(ids, 12);
    expect(g.text).toBe(tok.detokenize(want).replace(/\uFFFD$/, ""));
    expect(pieces.join("")).toBe(g.text);
    expect(g).toMatchObject({
      promptTokens: ids.length,
      completionTokens: want.length,
      finishReason: want.length < 12 ? "stop" : "length",
    });
    expect(engines.map((e) => e.openSequences)).toEqual([0, 0]);
  });

  it("ends just before a stop sequence, which the stream never shows", async () => {
    const { ctx, lease } = await routeOf();
    const req = request({ maxNewTokens: 16 });
    const ids = planPrompt(tok, req).ids;
    const full = tok.detokenize(greedy(ids, 16));
    const stop = full.slice(5, 7);
    const pieces: string[] = [];
    const g = await generate(
      ctx,
      lease,
      { ...req, stop: [stop] },
      ids,
      new AbortController().signal,
      (p) => void pieces.push(p),
    );
    expect(g.text).toBe(full.slice(0, full.indexOf(stop)));
    expect(pieces.join("")).toBe(g.text);
    expect(g.finishReason).toBe("stop");
  });

  it("leaves out a character that max_tokens cut, streamed or not: the same bytes both ways", async () => {
    const { ctx, lease } = await routeOf();
    const req = request({ prompt: promptEndingInSplitChar(6), maxNewTokens: 6 });
    const ids = planPrompt(tok, req).ids;
    const pieces: string[] = [];
    const g = await generate(ctx, lease, req, ids, new AbortController().signal, (p) => void pieces.push(p));
    expect(g.completionTokens).toBe(6);
    expect(g.text).not.toContain("\uFFFD");
    expect(g.text).toBe(tok.detokenize(greedy(ids, 5)));
    expect(pieces.join("")).toBe(g.text);
  });

  it("refuses a prompt and max_tokens past the route's context with the 400 that names it, before any step", async () => {
    const { ctx, lease, engines } = await routeOf({ maxSessionCells: 16 });
    const req = request({ maxNewTokens: 10 });
    const ids = planPrompt(tok, req).ids;
    expect(() => routeWindow(ctx, lease, ids, req)).toThrow(/context/);
    await expect(generate(ctx, lease, req, ids, new AbortController().signal, () => {})).rejects
      .toMatchObject({
        status: 400,
        code: "context_length_exceeded",
      });
    expect(engines.every((e) => e.calls.length === 0)).toBe(true);
  });

  it("a prompt that finds the KV pools full waits for room, then answers whole (not an empty length)", async () => {
    const { ctx, engines, seams, ranges, lease } = await routeOf({ kvCells: 64 });
    // an older session holds 62 of every node's 64 cells
    const hog = await RouteSession.open(
      seams.dial,
      await signedHops(ranges.map((range, i) => ({ url: `http://n${i}`, range })), "hog"),
      { sessionId: "hog", epoch: 1n, artifactSha256: ARTIFACT, kvCells: 64 },
    );
    await hog.prefill(Int32Array.from({ length: 62 }, (_, i) => i % 30));
    let reroutes = 0;
    const ctxWithRepair: GenerationContext = {
      ...ctx,
      repair: {
        reroute: () => (reroutes++, Promise.resolve(lease)),
        dead: () => Promise.resolve([]),
        deadlineMs: 4_000,
        resume: false,
      },
    };
    setTimeout(() => void hog.release(), 300);
    const req = request({ maxNewTokens: 8 });
    const ids = planPrompt(tok, req).ids;
    const g = await generate(ctxWithRepair, lease, req, ids, new AbortController().signal, () => {});
    const want = greedy(ids, 8);
    expect(g.text).toBe(tok.detokenize(want).replace(/\uFFFD$/, ""));
    expect(g.completionTokens).toBe(want.length);
    expect(reroutes).toBeGreaterThan(0);
    expect(engines.map((e) => e.openSequences)).toEqual([0, 0]);
  });

  it("a prompt that finds no room before the repair deadline gets 503 kv_full, not an empty answer", async () => {
    const { ctx, seams, ranges, lease } = await routeOf({ kvCells: 64 });
    const hog = await RouteSession.open(
      seams.dial,
      await signedHops(ranges.map((range, i) => ({ url: `http://n${i}`, range })), "hog"),
      { sessionId: "hog", epoch: 1n, artifactSha256: ARTIFACT, kvCells: 64 },
    );
    await hog.prefill(Int32Array.from({ length: 62 }, (_, i) => i % 30));
    const ctxWithRepair: GenerationContext = {
      ...ctx,
      repair: {
        reroute: () => Promise.resolve(lease),
        dead: () => Promise.resolve([]),
        deadlineMs: 800,
        resume: false,
      },
    };
    const req = request({ maxNewTokens: 8 });
    const run = generate(
      ctxWithRepair,
      lease,
      req,
      planPrompt(tok, req).ids,
      new AbortController().signal,
      () => {},
    );
    await expect(run).rejects.toMatchObject({ code: "kv_full" });
    expect(routeError(await run.catch((e) => e)).status).toBe(503);
    await hog.release();
  });

  it("a client that leaves cancels the session on every node", async () => {
    const { ctx, lease, engines } = await routeOf();
    const req = request({ maxNewTokens: 200 });
    const ids = planPrompt(tok, req).ids;
    const gone = new AbortController();
    let n = 0;
    const run = generate(ctx, lease, req, ids, gone.signal, () => {
      if (++n === 2) gone.abort();
    });
    await expect(run).rejects.toMatchObject({ code: "cancelled" });
    for (let i = 0; i < 100 && engines.some((e) => e.openSequences > 0); i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(engines.map((e) => e.openSequences)).toEqual([0, 0]);
  });
});
