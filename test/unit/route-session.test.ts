import { create } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  Compression,
  ElementType,
  NodeTelemetrySchema,
  OpenSchema,
  Phase,
  SampledSchema,
  type SeamFrame,
  SeamFrameSchema,
  StatusSchema,
} from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { replyTo, sessionFailure } from "../../src/node/replies.ts";
import { ShardNode, type ShardNodeOptions } from "../../src/node/shard-node.ts";
import { GREEDY, type RouteHop, RouteSession, type SessionOptions } from "../../src/route/route-session.ts";
import { SeamError } from "../../src/seam/errors.ts";
import { unpackTensor } from "../../src/seam/tensor.ts";
import { expectedToken, FakeEngine } from "../fakes/fake-engine.ts";
import { Inbox } from "../fakes/inbox.ts";
import { MemorySeams } from "../fakes/memory-seams.ts";
import { ARTIFACT, routeKey, signedHops } from "../fakes/route-keys.ts";

// millisecond tests: one that waits this long is stuck (the config's limit is for integration runs)
vi.setConfig({ testTimeout: 5_000 });

const HOPS: RouteHop[] = [
  { url: "http://first", range: { start: 0, end: 2 }, ticket: Uint8Array.of(1, 1) },
  { url: "http://second", range: { start: 2, end: 4 }, ticket: Uint8Array.of(2, 2) },
];

const options = (o: Partial<SessionOptions> = {}): SessionOptions => ({
  sessionId: "s1",
  epoch: 3n,
  artifactSha256: ARTIFACT,
  kvCells: 64,
  ...o,
});

/** A first shard the test plays by hand: it sees every frame and answers as the test says. */
class ScriptedShard {
  frames!: Inbox<SeamFrame>;
  reply!: (f: SeamFrame) => void;
  /** ends the stream from the shard's side */
  end!: () => void;

  constructor(seams: MemorySeams, url = "http://first") {
    seams.listen(url, (frames, reply) => {
      this.frames = new Inbox(frames);
      this.reply = reply;
      return new Promise((r) => (this.end = r));
    });
  }

  frame(phase: Phase, stepId?: bigint): Promise<SeamFrame> {
    return this.frames.until((f) => f.phase === phase && (stepId === undefined || f.stepId === stepId));
  }

  /** Answers a step with the last shard's token. */
  token(f: SeamFrame, token: number, margin = 1): void {
    this.reply(replyTo(f, {
      cacheResult: f.positions!.start + f.positions!.count,
      sampled: create(SampledSchema, { token, margin }),
      telemetry: [
        create(NodeTelemetrySchema, { node: "last" }),
        create(NodeTelemetrySchema, { node: "first" }),
      ],
    }));
  }

  refuse(f: SeamFrame, code: string, message = code): void {
    this.reply(replyTo(f, { status: create(StatusSchema, { code, message }) }));
  }
}

/** Answers the shard's steps, one after another, with these tokens. */
function answerSteps(shard: ScriptedShard, tokens: number[]): void {
  void (async () => {
    for (const [i, t] of tokens.entries()) {
      const f = await shard.frames.until((x) => x.phase === Phase.PREFILL || x.phase === Phase.DECODE, i + 1);
      shard.token(f, t);
    }
  })().catch(() => {}); // the stream may end before every token was asked for
}

/** A session opened through a scripted first shard that accepts the OPEN. */
async function opened(o: Partial<SessionOptions> = {}) {
  const seams = new MemorySeams();
  const shard = new ScriptedShard(seams);
  const opening = RouteSession.open(seams.dial, HOPS, options(o));
  shard.reply(replyTo(await shard.frame(Phase.OPEN)));
  const session = await opening;
  return { seams, shard, session, link: seams.links[0] };
}

const codeOf = async (p: Promise<unknown>) => {
  try {
    await p;
    return "ok";
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
};

/** Polls a condition the code under test reaches through several hops of promises. */
async function until(ok: () => boolean, ms = 1_000): Promise<void> {
  for (const t0 = Date.now(); !ok(); await new Promise((r) => setTimeout(r, 1))) {
    if (Date.now() - t0 > ms) throw new Error(`not reached within ${ms} ms`);
  }
}

const ids = (
  f: SeamFrame,
) => [...unpackTensor(f.tensors[0], { name: "token_ids", elementType: ElementType.I32 }).values];

afterEach(() => {
  vi.useRealTimers();
});

describe("route session: open", () => {
  it("opens through the first shard: its ticket, the rest of the route as hops, the session's cells", async () => {
    const { seams, shard } = await opened({
      sampling: { ...GREEDY, seed: 9n },
      compression: Compression.Q8_ROW,
    });
    const open = await shard.frame(Phase.OPEN);
    // frames go to the first shard; the last one gets a reply link of its own (nobody serves it
    // here, so replies come up the route)
    expect(seams.links.map((l) => l.url)).toEqual(["http://first", "http://second"]);
    expect(open).toMatchObject({
      schemaVersion: 1,
      sessionId: "s1",
      routeEpoch: 3n,
      artifactSha256: ARTIFACT,
      range: { start: 0, end: 2 },
      stepId: 1n,
      open: { routeTicket: Uint8Array.of(1, 1), kvCells: 64, seamCompression: Compression.Q8_ROW },
    });
    expect(open.open!.sampling!.seed).toBe(9n);
    expect(open.open!.nextHops.map((h) => [h.url, h.range!.start, h.range!.end, [...h.routeTicket]])).toEqual(
      [
        ["http://second", 2, 4, [2, 2]],
      ],
    );
  });

  it("throws the refusal of OPEN, with its code, and tears the link down", async () => {
    const seams = new MemorySeams();
    const shard = new ScriptedShard(seams);
    const opening = RouteSession.open(seams.dial, HOPS, options());
    shard.refuse(await shard.frame(Phase.OPEN), "unauthenticated", "route ticket refused: expired");
    await expect(opening).rejects.toMatchObject({ code: "unauthenticated", message: /expired/ });
    expect(seams.links[0].aborted).toBe("open refused");
  });

  it("refuses a route with no hop", async () => {
    await expect(RouteSession.open(new MemorySeams().dial, [], options())).rejects.toMatchObject({
      code: "malformed",
    });
  });

  it("fails to open when no node answers at the first hop's URL", async () => {
    const seams = new MemorySeams();
    await expect(RouteSession.open(seams.dial, HOPS, options())).rejects.toMatchObject({
      code: "unavailable",
    });
  });

  it("with pipelineOpen, sends the prompt right behind OPEN; a refused OPEN is what prefill throws", async () => {
    const seams = new MemorySeams();
    const shard = new ScriptedShard(seams);
    const session = await RouteSession.open(seams.dial, HOPS, options({ pipelineOpen: true }));
    const prefill = session.prefill(Int32Array.of(1, 2, 3));
    const chunk = await shard.frame(Phase.PREFILL);
    // the chunk was sent before OPEN had any answer
    expect(shard.frames.items.map((f) => f.phase)).toEqual([Phase.OPEN, Phase.PREFILL]);
    shard.refuse(await shard.frame(Phase.OPEN), "kv_full", "no cells");
    shard.refuse(chunk, "unknown_session");
    await expect(prefill).rejects.toMatchObject({ code: "kv_full" });
    expect(seams.links[0].aborted).toBe("open refused");
  });

  it("with pipelineOpen, an accepted OPEN lets the prompt's reply through", async () => {
    const seams = new MemorySeams();
    const shard = new ScriptedShard(seams);
    const session = await RouteSession.open(seams.dial, HOPS, options({ pipelineOpen: true }));
    const prefill = session.prefill(Int32Array.of(1, 2, 3));
    const chunk = await shard.frame(Phase.PREFILL);
    shard.token(chunk, 17); // the chunk's answer may even come first
    shard.reply(replyTo(await shard.frame(Phase.OPEN)));
    expect((await prefill).token).toBe(17);
  });
});

describe("route session: steps", () => {
  it("sends a prompt in bounded chunks, all at once, each expecting what the ones before it fill", async () => {
    const { shard, session } = await opened({ prefillChunk: 4 });
    const prefill = session.prefill(Int32Array.from([10, 11, 12, 13, 14, 15, 16, 17, 18, 19]));
    await shard.frames.count(4); // OPEN and three chunks, no reply yet
    const chunks = shard.frames.items.slice(1);
    expect(chunks.map((f) => [f.stepId, f.positions!.start, f.positions!.count, f.cacheExpect])).toEqual([
      [2n, 0, 4, 0],
      [3n, 4, 4, 4],
      [4n, 8, 2, 8],
    ]);
    expect(chunks.map((f) => [f.phase, f.chunkIndex, f.chunkCount])).toEqual([
      [Phase.PREFILL, 0, 3],
      [Phase.PREFILL, 1, 3],
      [Phase.PREFILL, 2, 3],
    ]);
    expect(chunks.map(ids)).toEqual([[10, 11, 12, 13], [14, 15, 16, 17], [18, 19]]);
    expect(session.position).toBe(10);
    shard.reply(replyTo(chunks[0]));
    shard.reply(replyTo(chunks[1]));
    shard.token(chunks[2], 5, 0.25);
    expect(await prefill).toMatchObject({ token: 5, margin: 0.25 });
  });

  it("cuts a prompt into chunks of the route's pipeline floor when no chunk is fixed", async () => {
    const { shard, session } = await opened({ pipelineChunkFloor: 16 });
    const prompt = Int32Array.from({ length: 64 }, (_, i) => i + 1);
    const prefill = session.prefill(prompt);
    await shard.frames.count(5); // OPEN and four chunks of 16
    const chunks = shard.frames.items.slice(1);
    expect(chunks.map((f) => [f.positions!.start, f.positions!.count, f.chunkIndex, f.chunkCount])).toEqual([
      [0, 16, 0, 4],
      [16, 16, 1, 4],
      [32, 16, 2, 4],
      [48, 16, 3, 4],
    ]);
    for (const c of chunks.slice(0, 3)) shard.reply(replyTo(c));
    shard.token(chunks[3], 7);
    expect((await prefill).token).toBe(7);
  });

  it("decodes at the position the prompt left and returns the token with every node's telemetry", async () => {
    const { shard, session } = await opened();
    const prefill = session.prefill(Int32Array.of(1, 2));
    shard.token(await shard.frame(Phase.PREFILL), 3);
    await prefill;
    const decode = session.decode(3);
    const f = await shard.frame(Phase.DECODE);
    expect([f.stepId, f.positions!.start, f.positions!.count, f.cacheExpect]).toEqual([3n, 2, 1, 2]);
    expect(ids(f)).toEqual([3]);
    shard.token(f, 8);
    const r = await decode;
    expect(r.token).toBe(8);
    expect(r.telemetry.map((t) => t.node)).toEqual(["last", "first"]);
    expect(session.position).toBe(3);
  });

  it("matches replies to steps by id in whatever order they come, and ignores answers to no step", async () => {
    const { shard, session } = await opened({ prefillChunk: 1 });
    const prefill = session.prefill(Int32Array.of(1, 2, 3));
    await shard.frames.count(4);
    const [, a, b, c] = shard.frames.items;
    shard.token(c, 30);
    shard.reply(replyTo(b));
    shard.token(c, 99); // a second answer to a step already answered
    shard.reply(replyTo(a));
    shard.token(a, 99);
    expect((await prefill).token).toBe(30);
  });

  it("rejects a refused step with the refusal's code and message", async () => {
    const { shard, session } = await opened();
    const decode = session.decode(1);
    shard.refuse(await shard.frame(Phase.DECODE), "overloaded", "session s1 has 8 steps queued");
    await expect(decode).rejects.toMatchObject({ name: "SeamError", code: "overloaded", message: /8 steps/ });
  });

  it("refuses an answer without a token from the last shard as malformed", async () => {
    const { shard, session } = await opened();
    const decode = session.decode(1);
    shard.reply(replyTo(await shard.frame(Phase.DECODE)));
    await expect(decode).rejects.toMatchObject({ code: "malformed" });
  });

  it("generates until the stop condition or the token budget", async () => {
    const stopped = await opened();
    answerSteps(stopped.shard, [10, 11, 12, 0, 13]); // token 0 stands for end of generation
    const got: number[] = [];
    for await (const r of stopped.session.generate(Int32Array.of(1), 10, (t) => t === 0)) got.push(r.token);
    expect(got).toEqual([10, 11, 12, 0]);
    const capped = await opened();
    answerSteps(capped.shard, [20, 21, 22]);
    const some: number[] = [];
    for await (const r of capped.session.generate(Int32Array.of(1), 2, () => false)) some.push(r.token);
    expect(some).toEqual([20, 21]);
    expect(capped.shard.frames.items.map((f) => f.phase)).toEqual([Phase.OPEN, Phase.PREFILL, Phase.DECODE]);
  });
});

describe("route session: failures, deadlines, release and cancel", () => {
  it("a session failure (step 0 with a status) fails every pending step and every later call", async () => {
    const { shard, session, link } = await opened();
    const decode = session.decode(1);
    await shard.frame(Phase.DECODE);
    shard.reply(
      sessionFailure({ sessionId: "s1", routeEpoch: 3n, workId: "" }, "wrong_epoch", "re-opened at 4"),
    );
    await expect(decode).rejects.toMatchObject({ code: "wrong_epoch" });
    await expect(session.decode(2)).rejects.toMatchObject({ code: "wrong_epoch" });
    // nothing to release along a route that lost the session: the link just closes
    await session.release();
    expect(shard.frames.items.map((f) => f.phase)).toEqual([Phase.OPEN, Phase.DECODE]);
    expect(link.closed).toBe(true);
  });

  it("fails pending steps with unavailable when the first shard ends the stream or goes away", async () => {
    const ended = await opened();
    const a = ended.session.decode(1);
    await ended.shard.frame(Phase.DECODE);
    ended.shard.end();
    await expect(a).rejects.toMatchObject({ code: "unavailable", message: /ended the stream/ });

    const gone = await opened();
    const b = gone.session.decode(1);
    await gone.shard.frame(Phase.DECODE);
    gone.link.vanish("connection reset");
    await expect(b).rejects.toMatchObject({ code: "unavailable", message: /connection reset/ });
    await expect(gone.session.decode(2)).rejects.toMatchObject({ code: "unavailable" });
  });

  it("a step past its deadline fails with deadline and ends the route by closing the link", async () => {
    vi.useFakeTimers();
    const { shard, session, link } = await opened({ stepTimeoutMs: 1_000 });
    const decode = session.decode(1);
    const outcome = codeOf(decode);
    await vi.advanceTimersByTimeAsync(999);
    expect(link.closed).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await outcome).toBe("deadline");
    await vi.advanceTimersByTimeAsync(0);
    expect(link.closed).toBe(true);
    // failed already: no CANCEL is sent, the stream's end frees the route
    expect(shard.frames.items.map((f) => f.phase)).toEqual([Phase.OPEN, Phase.DECODE]);
    await expect(session.decode(2)).rejects.toMatchObject({ code: "deadline" });
  });

  it("release ends the session on the route, waits for its answer, then closes the link", async () => {
    const { shard, session, link } = await opened();
    const releasing = session.release();
    const f = await shard.frame(Phase.RELEASE);
    expect(f.stepId).toBe(2n);
    expect(link.closed).toBe(false);
    shard.reply(replyTo(f));
    await releasing;
    expect(link.closed).toBe(true);
    await session.release(); // once only
    expect(shard.frames.items.filter((x) => x.phase === Phase.RELEASE)).toHaveLength(1);
    await expect(session.decode(1)).rejects.toMatchObject({ code: "unknown_session" });
  });

  it("cancel abandons the pending steps, sends CANCEL down the route and closes the link", async () => {
    const { shard, session, link } = await opened();
    const decode = session.decode(1);
    await shard.frame(Phase.DECODE);
    const cancelling = session.cancel();
    await expect(decode).rejects.toMatchObject({ code: "cancelled" });
    const c = await shard.frame(Phase.CANCEL);
    expect(c.stepId).toBe(3n);
    shard.reply(replyTo(c));
    await cancelling;
    expect(link.closed).toBe(true);
    await session.cancel();
    await expect(session.decode(1)).rejects.toMatchObject({ code: "unknown_session" });
  });

  it("abandon fails the pending step with the given error at once, sends CANCEL unanswered, closes the link", async () => {
    vi.useFakeTimers();
    const { shard, session, link } = await opened();
    const decode = session.decode(1);
    await shard.frame(Phase.DECODE);
    session.abandon(new SeamError("unavailable", "node n2 left the network"));
    await expect(decode).rejects.toThrow("node n2 left the network");
    // the survivors free the session; nobody waits for an answer from a route with a dead hop
    expect((await shard.frame(Phase.CANCEL)).stepId).toBe(3n);
    expect(link.closed).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    await expect(session.decode(1)).rejects.toMatchObject({ code: "unavailable" });
    await session.cancel(); // after abandon: nothing more is sent
    expect(shard.frames.items.filter((f) => f.phase === Phase.CANCEL)).toHaveLength(1);
  });

  it("says how long the oldest step in flight has waited, and how long steps usually take", async () => {
    vi.useFakeTimers();
    const { shard, session } = await opened();
    expect(session.stalled()).toEqual({ waitingMs: 0, usualStepMs: 0 });
    const decode = session.decode(1);
    const f = await shard.frame(Phase.DECODE);
    await vi.advanceTimersByTimeAsync(300);
    shard.token(f, 5);
    await decode;
    expect(session.stalled().waitingMs).toBe(0);
    expect(session.stalled().usualStepMs).toBeGreaterThanOrEqual(300);
    void session.decode(5).catch(() => {});
    await shard.frame(Phase.DECODE, 3n);
    await vi.advanceTimersByTimeAsync(2_500);
    expect(session.stalled().waitingMs).toBeGreaterThanOrEqual(2_500);
    session.abandon(new SeamError("unavailable", "gone"));
  });

  // cancel() must clear the pending steps' deadline timers: armed, each would keep a process that
  // cancelled alive for stepTimeoutMs (STEP_TIMEOUT_MS by default)
  it("cancel leaves no deadline timer behind", async () => {
    vi.useFakeTimers();
    const { shard, session } = await opened({ stepTimeoutMs: 60_000 });
    const decode = codeOf(session.decode(1));
    await shard.frame(Phase.DECODE);
    const cancelling = session.cancel();
    shard.reply(replyTo(await shard.frame(Phase.CANCEL)));
    await cancelling;
    expect(await decode).toBe("cancelled");
    expect(vi.getTimerCount()).toBe(0);
  });
});

type ShardNodeLimits = ShardNodeOptions["limits"];

/** Two fake shards (layers 0:2 and 2:4) served by shard nodes over in-memory seams. */
async function twoShards(
  engine: ConstructorParameters<typeof FakeEngine>[0],
  limits: (i: number) => ShardNodeLimits,
) {
  const seams = new MemorySeams();
  const { publicKey } = await routeKey();
  const engines = [
    new FakeEngine({ ...engine, range: { start: 0, end: 2 } }),
    new FakeEngine({ ...engine, range: { start: 2, end: 4 } }),
  ];
  const nodes = engines.map((e, i) =>
    new ShardNode(e, {
      nodeId: `n${i}`,
      artifactSha256: ARTIFACT,
      routeKey: publicKey,
      dial: seams.dial,
      limits: limits(i),
      leaseMs: 60_000,
    })
  );
  seams.listen("http://n0", nodes[0].serve);
  seams.listen("http://n1", nodes[1].serve);
  const hops = (id: string) =>
    signedHops([{ url: "http://n0", range: { start: 0, end: 2 } }, {
      url: "http://n1",
      range: { start: 2, end: 4 },
    }], id);
  return { seams, engines, nodes, hops };
}

describe("prefix reuse over shard nodes", () => {
  /** Two fake shards on which nodes keep prefixes (where `keeps` says so). */
  async function route(keeps = [true, true]) {
    const r = await twoShards({ backend: "wasm-cpu" }, (i) => ({
      maxBatchTokens: 128,
      maxQueuedPerSession: 8,
      kvCells: 256,
      prefix: keeps[i] ? { entries: 4, cells: 128 } : undefined,
    }));
    const open = async (id: string, prompt: Int32Array) =>
      await RouteSession.open(
        r.seams.dial,
        await r.hops(id),
        options({ sessionId: id, epoch: 1n, kvCells: 128, prefixOf: prompt }),
      );
    return { engines: r.engines, nodes: r.nodes, open };
  }

  const tokensOf = async (s: RouteSession, prompt: Int32Array, n: number) => {
    const out: number[] = [];
    for await (const x of s.generate(prompt, n, () => false)) out.push(x.token);
    return out;
  };
  const conversation = Int32Array.from({ length: 70 }, (_, i) => (i * 5) % 32);

  it("a prompt that extends a released session computes only what follows its whole blocks", async () => {
    const r = await route();
    try {
      const a = await r.open("a", conversation);
      const answer = await tokensOf(a, conversation, 4);
      await a.release();
      expect(a.kept).toHaveLength(1); // 73 positions held: one whole block of 64
      const next = Int32Array.from([...conversation, ...answer.slice(0, 3), 9, 9]);
      const b = await r.open("b", next);
      expect(b.reused).toBe(64);
      const got = await tokensOf(b, next, 3);
      // the rows name their positions: a step at the wrong place would give other tokens
      let t = next[next.length - 1], pos = next.length - 1;
      expect(got).toEqual(got.map(() => (t = expectedToken(t, pos++))));
      // both shards computed the rest of the prompt, from position 64, in one call
      for (const e of r.engines) {
        expect(e.calls.some((c) => c.pos[0] === 64 && c.pos.length === next.length - 64)).toBe(true);
      }
      await b.release();
    } finally {
      for (const n of r.nodes) await n.close();
    }
  });

  it("a route goes on from the fewest positions a shard held: one without the prefix, all from 0", async () => {
    const r = await route([true, false]);
    try {
      const a = await r.open("a", conversation);
      await tokensOf(a, conversation, 4);
      await a.release();
      const b = await r.open("b", conversation);
      expect(b.reused).toBe(0);
      await tokensOf(b, conversation, 2);
      // the first shard took its entry, then cut back to nothing for the route
      const calls = r.engines[0].calls;
      expect(calls[calls.length - 2].pos[0]).toBe(0);
      expect((await r.nodes[0].info()).prefix?.hits).toBe(1n);
      await b.release();
    } finally {
      for (const n of r.nodes) await n.close();
    }
  });
});

describe("route session over shard nodes", () => {
  const route = (kvCells = 256) =>
    twoShards({ kvCells }, () => ({ maxBatchTokens: 64, maxQueuedPerSession: 8, kvCells }));

  /** The tokens the fake model gives after a prompt, greedy. */
  const predicted = (prompt: number[], n: number) => {
    const out: number[] = [];
    let t = prompt[prompt.length - 1], pos = prompt.length - 1;
    for (let i = 0; i < n; i++) out.push(t = expectedToken(t, pos++));
    return out;
  };

  it("gives the model's tokens, with telemetry from both nodes, and frees every cell at release", async () => {
    const r = await route();
    try {
      const s = await RouteSession.open(
        r.seams.dial,
        await r.hops("a"),
        options({ sessionId: "a", epoch: 1n }),
      );
      const got = [];
      for await (const step of s.generate(Int32Array.of(3, 1, 4), 5, () => false)) got.push(step);
      expect(got.map((x) => x.token)).toEqual(predicted([3, 1, 4], 5));
      // greedy margin is the peak's height: the 4 layers the rows went through
      expect(got.every((x) => x.margin === 4)).toBe(true);
      expect(got[1].telemetry.map((t) => t.node)).toEqual(["n1", "n0"]);
      expect(r.engines.map((e) => e.cellsUsed)).toEqual([7, 7]);
      await s.release();
      expect(r.engines.map((e) => [e.cellsUsed, e.openSequences])).toEqual([[0, 0], [0, 0]]);
      expect(r.nodes.map((n) => n.sessionIds())).toEqual([[], []]);
    } finally {
      await Promise.all(r.nodes.map((n) => n.close()));
    }
  });

  it("a pipelined prompt the first shard has no room for fails at once, not when OPEN's answer times out", async () => {
    const r = await route(64);
    try {
      // an older session holds 62 of each node's 64 cells
      const hog = await RouteSession.open(
        r.seams.dial,
        await r.hops("hog"),
        options({ sessionId: "hog", epoch: 1n }),
      );
      await hog.prefill(Int32Array.from({ length: 62 }, (_, i) => i % 30));
      // the first shard refuses the prompt and drops the session: OPEN's answer from the last shard
      // never comes back through it
      const s = await RouteSession.open(
        r.seams.dial,
        await r.hops("s"),
        options({ sessionId: "s", epoch: 1n, kvCells: 20, pipelineOpen: true, stepTimeoutMs: 60_000 }),
      );
      await expect(s.prefill(Int32Array.of(1, 2, 3, 4, 5))).rejects.toMatchObject({ code: "context_full" });
      await hog.release();
    } finally {
      await Promise.all(r.nodes.map((n) => n.close()));
    }
  });

  it("the last shard replies straight to the driver: hops + 1 crossings a step, each link named", async () => {
    const r = await route();
    try {
      const direct = await RouteSession.open(
        r.seams.dial,
        await r.hops("d"),
        options({ sessionId: "d", epoch: 1n }),
      );
      const climbed = await RouteSession.open(
        r.seams.dial,
        await r.hops("c"),
        options({ sessionId: "c", epoch: 1n, replyLink: false }),
      );
      const steps = async (s: RouteSession) => {
        const out = [];
        for await (const step of s.generate(Int32Array.of(3, 1, 4), 4, () => false)) out.push(step);
        return out;
      };
      const [d, c] = await Promise.all([steps(direct), steps(climbed)]);
      // the same tokens either way
      expect(d.map((x) => x.token)).toEqual(predicted([3, 1, 4], 4));
      expect(c.map((x) => x.token)).toEqual(d.map((x) => x.token));
      // driver → n0 → n1 → driver, against driver → n0 → n1 → n0 → driver
      expect(d.map((x) => x.crossings)).toEqual([3, 3, 3, 3]);
      expect(c.map((x) => x.crossings)).toEqual([4, 4, 4, 4]);
      // telemetry still names every node, last shard first, with what each sent on
      expect(d[2].telemetry.map((t) => [t.node, t.transport])).toEqual([["n1", "memory"], ["n0", "memory"]]);
      expect(c[2].telemetry.map((t) => t.node)).toEqual(["n1", "n0"]);
      // the replies came on the reply link: n1 answered n0's stream with nothing but OPEN's answer
      const n0ToN1 = r.seams.to("http://n1").find((l) =>
        l.sent.some((f) => f.sessionId === "d" && !f.open?.replyLink)
      )!;
      expect(n0ToN1.received.map((f) => f.phase)).toEqual([Phase.OPEN]);
      await Promise.all([direct.release(), climbed.release()]);
      expect(r.engines.map((e) => e.cellsUsed)).toEqual([0, 0]);
    } finally {
      await Promise.all(r.nodes.map((n) => n.close()));
    }
  });

  it("a last shard the driver cannot reach answers up the route; a reply link is checked like OPEN", async () => {
    const r = await route();
    try {
      const unreachable = (url: string) => {
        if (url === "http://n1") throw new Error("no way to n1 from here");
        return r.seams.dial(url);
      };
      const s = await RouteSession.open(
        unreachable,
        await r.hops("u"),
        options({ sessionId: "u", epoch: 1n }),
      );
      const got = [];
      for await (const step of s.generate(Int32Array.of(3, 1, 4), 3, () => false)) got.push(step);
      expect(got.map((x) => x.crossings)).toEqual([4, 4, 4]);
      expect(got.map((x) => x.token)).toEqual(predicted([3, 1, 4], 3));
      await s.release();
      // a reply link needs the last shard and its ticket
      const hops = await r.hops("x");
      const attach = async (url: string, ticket: Uint8Array, range: { start: number; end: number }) => {
        const link = r.seams.link(url);
        link.send(create(SeamFrameSchema, {
          schemaVersion: 1,
          sessionId: "x",
          routeEpoch: 1n,
          artifactSha256: ARTIFACT,
          range,
          phase: Phase.OPEN,
          stepId: 1n,
          open: create(OpenSchema, { routeTicket: ticket, replyLink: true }),
        }));
        const answer = await new Inbox(link.replies).until(() => true);
        link.close();
        return answer.status ? `${answer.status.code}: ${answer.status.message}` : "ok";
      };
      expect(await attach("http://n0", hops[0].ticket, hops[0].range)).toBe(
        "malformed: only the last shard sends replies to the owner",
      );
      expect(await attach("http://n1", hops[0].ticket, hops[1].range)).toMatch(/^unauthenticated: /);
      expect(await attach("http://n1", hops[1].ticket, hops[1].range)).toBe("ok");
    } finally {
      await Promise.all(r.nodes.map((n) => n.close()));
    }
  });

  it("runs sessions side by side, batched on both nodes; cancelling one leaves the others whole", async () => {
    const r = await route();
    try {
      const prompts = [[1, 2], [5], [7, 7, 7], [30, 4]];
      const run = async (prompt: number[], i: number) => {
        const id = `s${i}`;
        const s = await RouteSession.open(
          r.seams.dial,
          await r.hops(id),
          options({ sessionId: id, epoch: 1n }),
        );
        const got: number[] = [];
        for await (const step of s.generate(Int32Array.from(prompt), 6, () => false)) {
          got.push(step.token);
          if (i === 1 && got.length === 3) {
            await s.cancel();
            return got;
          }
        }
        await s.release();
        return got;
      };
      // hold node 0's first batch until every prompt has arrived, so that they meet in the next
      r.engines[0].pause();
      const running = Promise.all(prompts.map(run));
      await until(() =>
        r.seams.to("http://n0").filter((l) => l.sent.some((f) => f.phase === Phase.PREFILL)).length === 4
      );
      r.engines[0].resume();
      const results = await running;
      expect(results).toEqual(prompts.map((p, i) => predicted(p, i === 1 ? 3 : 6)));
      const infos = await Promise.all(r.nodes.map((n) => n.info()));
      expect(infos.map((i) => i.maxBatchSessions > 1)).toEqual([true, true]);
      expect(r.engines.map((e) => [e.cellsUsed, e.openSequences])).toEqual([[0, 0], [0, 0]]);
    } finally {
      await Promise.all(r.nodes.map((n) => n.close()));
    }
  });
});
