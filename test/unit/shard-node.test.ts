import { afterEach, describe, expect, it, vi } from "vitest";
import { ElementType, Phase, type SeamFrame } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { BatcherLimits } from "../../src/scheduler/batcher.ts";
import { ShardNode } from "../../src/node/shard-node.ts";
import { GREEDY } from "../../src/route/route-session.ts";
import { generateRouteKey } from "../../src/route/ticket.ts";
import { packTensor, unpackTensor } from "../../src/seam/tensor.ts";
import { expectedToken, FakeEngine, type FakeEngineOptions, hiddenRows } from "../fakes/fake-engine.ts";
import {
  type Addressed,
  hiddenStep,
  type OpenFields,
  openFrame,
  releaseFrame,
  tokenStep,
} from "../fakes/frames.ts";
import { Inbox } from "../fakes/inbox.ts";
import { MemoryLink, MemorySeams } from "../fakes/memory-seams.ts";
import { ARTIFACT, routeKey, signedHops, ticketFor } from "../fakes/route-keys.ts";

// millisecond tests: one that waits this long is stuck (the config's limit is for integration runs)
vi.setConfig({ testTimeout: 5_000 });

const created: ShardNode[] = [];
afterEach(async () => {
  // close first: a node made under fake timers holds a fake lease timer
  await Promise.all(created.splice(0).map((n) => n.close()));
  vi.useRealTimers();
});

interface Route {
  readonly seams: MemorySeams;
  readonly engines: FakeEngine[];
  readonly nodes: ShardNode[];
  readonly ranges: Array<{ start: number; end: number }>;
}

/** Nodes at http://n0, http://n1, … holding consecutive ranges of a 4-layer model. */
async function route(
  ranges: Array<[number, number]>,
  o: {
    limits?: Partial<BatcherLimits>;
    leaseMs?: number;
    parkMs?: number;
    unusedMs?: number;
    engine?: FakeEngineOptions;
  } = {},
): Promise<Route> {
  const seams = new MemorySeams();
  const { publicKey } = await routeKey();
  const engines = ranges.map(([start, end]) => new FakeEngine({ ...o.engine, range: { start, end } }));
  const nodes = engines.map((e, i) => {
    const n = new ShardNode(e, {
      nodeId: `n${i}`,
      artifactSha256: ARTIFACT,
      routeKey: publicKey,
      dial: seams.dial,
      limits: { maxBatchTokens: 64, maxQueuedPerSession: 8, kvCells: 256, ...o.limits },
      leaseMs: o.leaseMs ?? 60_000,
      // most tests here: a broken route frees at once (parking for repairs: its own tests)
      parkMs: o.parkMs ?? 0,
      unusedMs: o.unusedMs,
    });
    seams.listen(`http://n${i}`, n.serve);
    created.push(n);
    return n;
  });
  return { seams, engines, nodes, ranges: ranges.map(([start, end]) => ({ start, end })) };
}

/** A driver's stream to a node: what it sends, and the replies as they come. */
class Driver {
  readonly link: MemoryLink;
  readonly inbox: Inbox<SeamFrame>;

  constructor(r: Route, node = 0) {
    this.link = r.seams.link(`http://n${node}`);
    this.inbox = new Inbox(this.link.replies);
  }

  /** Sends a frame; resolves with the next reply that names its step. */
  async ask(f: SeamFrame): Promise<SeamFrame> {
    const from = this.inbox.items.length;
    this.link.send(f);
    return await this.inbox.until((r) => r.stepId === f.stepId && r.phase === f.phase, from);
  }

  /** The code a frame is answered with ("ok" when accepted). */
  async code(f: SeamFrame): Promise<string> {
    return (await this.ask(f)).status?.code ?? "ok";
  }

  /** The next session failure (step 0) this stream hears. */
  failure(): Promise<SeamFrame> {
    return this.inbox.until((r) => r.stepId === 0n && !!r.status);
  }
}

/** The address of session `id` at node i of the route. */
const at = (r: Route, i: number, sessionId = "s", epoch = 1n): Addressed => ({
  sessionId,
  epoch,
  range: r.ranges[i],
  recipe: i === 0 ? undefined : r.engines[i - 1].recipe,
});

/** OPEN for session `id` at node i, with tickets for it and every node after it. */
async function open(r: Route, i: number, id = "s", epoch = 1n, extra: Partial<OpenFields> = {}) {
  const next = await signedHops(
    r.ranges.slice(i + 1).map((range, k) => ({ url: `http://n${i + 1 + k}`, range })),
    id,
    epoch,
  );
  return openFrame(at(r, i, id, epoch), {
    ticket: await ticketFor({ sessionId: id, epoch, range: r.ranges[i] }),
    kvCells: 64,
    next,
    ...extra,
  });
}

const token = (f: SeamFrame) => f.sampled?.token;

describe("shard node: open", () => {
  it("accepts an OPEN with a ticket for exactly this session, epoch, artifact and range", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    const reply = await d.ask(await open(r, 0));
    expect(reply.status).toBeUndefined();
    expect(reply).toMatchObject({ phase: Phase.OPEN, sessionId: "s", routeEpoch: 1n, cacheResult: 0 });
    expect(r.nodes[0].sessionIds()).toEqual(["s"]);
    expect(await r.nodes[0].info()).toMatchObject({ sessions: 1, sessionsServed: 1n, kvCellsReserved: 0 });
  });

  it("refuses an OPEN it may not serve, with a code per cause, and the stream stays usable", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    const s = at(r, 0);
    const opening = async (o: Partial<OpenFields>, to: Partial<Addressed> = {}) =>
      await d.code(openFrame({ ...s, ...to }, {
        ticket: await ticketFor({ sessionId: "s", epoch: 1n, range: r.ranges[0] }),
        kvCells: 64,
        stepId: BigInt(d.inbox.items.length + 1),
        ...o,
      }));
    const forger = await generateRouteKey();
    expect({
      none: await opening({ ticket: new Uint8Array(0) }),
      expired: await opening({
        ticket: await ticketFor({ sessionId: "s", epoch: 1n, range: r.ranges[0], ttlMs: -1 }),
      }),
      otherSession: await opening({
        ticket: await ticketFor({ sessionId: "t", epoch: 1n, range: r.ranges[0] }),
      }),
      otherEpoch: await opening({
        ticket: await ticketFor({ sessionId: "s", epoch: 2n, range: r.ranges[0] }),
      }),
      otherRange: await opening({
        ticket: await ticketFor({ sessionId: "s", epoch: 1n, range: { start: 0, end: 2 } }),
      }),
      forged: await opening({
        ticket: await ticketFor({ sessionId: "s", epoch: 1n, range: r.ranges[0], key: forger.privateKey }),
      }),
      frameForOtherLayers: await opening({}, { range: { start: 0, end: 2 } }),
      frameForOtherArtifact: await opening({}, { artifact: new Uint8Array(32) }),
      tooManyCells: await opening({ kvCells: 257 }),
      noCells: await opening({ kvCells: 0 }),
      pastTheLastLayer: await opening({
        next: await signedHops([{ url: "http://n9", range: { start: 4, end: 5 } }], "s"),
      }),
    }).toEqual({
      none: "unauthenticated",
      expired: "unauthenticated",
      otherSession: "unauthenticated",
      otherEpoch: "unauthenticated",
      otherRange: "unauthenticated",
      forged: "unauthenticated",
      frameForOtherLayers: "wrong_shard",
      frameForOtherArtifact: "wrong_shard",
      tooManyCells: "kv_full",
      noCells: "malformed",
      pastTheLastLayer: "malformed",
    });
    expect(r.nodes[0].sessionIds()).toEqual([]);
    expect(await opening({})).toBe("ok");
    expect(await r.nodes[0].info()).toMatchObject({ refusedFrames: 11n, sessions: 1 });
  });

  it("refuses a route that stops early or skips layers, and a second session on one stream", async () => {
    const r = await route([[0, 2], [2, 4]]);
    const d = new Driver(r);
    expect(await d.code(await open(r, 0, "s", 1n, { next: [] }))).toBe("malformed");
    const skipping = await signedHops([{ url: "http://n1", range: { start: 3, end: 4 } }], "s");
    expect(await d.code(await open(r, 0, "s", 1n, { next: skipping, stepId: 2n }))).toBe("malformed");
    expect(await d.code(await open(r, 0, "s", 1n, { stepId: 3n }))).toBe("ok");
    expect(await d.code(await open(r, 0, "t", 1n, { stepId: 4n }))).toBe("malformed");
  });

  it("passes OPEN on with the next hop's own ticket and the rest of the route; the answer comes from the end", async () => {
    const r = await route([[0, 1], [1, 3], [3, 4]]);
    const d = new Driver(r);
    const f = await open(r, 0);
    const reply = await d.ask(f);
    expect(reply.status).toBeUndefined();
    const [toN1] = r.seams.to("http://n1");
    const [toN2] = r.seams.to("http://n2");
    expect(toN1.sent[0]).toMatchObject({
      range: { start: 1, end: 3 },
      recipeFingerprint: r.engines[0].recipe,
    });
    expect(toN1.sent[0].open!.routeTicket).toEqual(f.open!.nextHops[0].routeTicket);
    expect(toN1.sent[0].open!.nextHops.map((h) => h.url)).toEqual(["http://n2"]);
    expect(toN2.sent[0].open!.nextHops).toEqual([]);
    expect(r.nodes.map((n) => n.sessionIds())).toEqual([["s"], ["s"], ["s"]]);
  });
});

describe("shard node: steps", () => {
  it("answers a prompt in chunks and decode steps with the model's token, its position and telemetry", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    const s = at(r, 0);
    await d.ask(await open(r, 0));
    const c0 = await d.ask(
      tokenStep(s, { stepId: 2n, start: 0, tokens: [3, 1], chunkIndex: 0, chunkCount: 2 }),
    );
    expect(c0.cacheResult).toBe(2);
    expect(c0.sampled).toBeUndefined(); // no logits before the prompt's last chunk
    const c1 = await d.ask(tokenStep(s, { stepId: 3n, start: 2, tokens: [4], chunkIndex: 1, chunkCount: 2 }));
    expect(c1).toMatchObject({ cacheResult: 3, sampled: { token: expectedToken(4, 2), margin: 4 } });
    expect(c1.telemetry).toHaveLength(1);
    expect(c1.telemetry[0]).toMatchObject({
      node: "n0",
      range: { start: 0, end: 4 },
      batchSessions: 1,
      batchTokens: 1,
    });
    const t = token(c1)!;
    const dec = await d.ask(tokenStep(s, { stepId: 4n, start: 3, tokens: [t], phase: Phase.DECODE }));
    expect(dec).toMatchObject({ cacheResult: 4, sampled: { token: expectedToken(t, 3) } });
    expect(r.engines[0].cellsUsed).toBe(4);
  });

  it("samples under the session's grammar (history first), and refuses an OPEN whose grammar or history it cannot use", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    const s = at(r, 0);
    const grammar = { ...GREEDY, grammar: { gbnf: "allow 3 5", prefill: [3] }, history: [5] };
    await d.ask(await open(r, 0, "s", 1n, { sampling: grammar }));
    const first = await d.ask(tokenStep(s, { stepId: 2n, start: 0, tokens: [1, 2] }));
    // the fake's favourite after token 2 at position 1 is neither 3 nor 5
    expect(expectedToken(2, 1)).not.toBeOneOf([3, 5]);
    let t = token(first)!;
    const seen = [t];
    for (let pos = 2, step = 3n; pos < 6; pos++, step++) {
      t = token(await d.ask(tokenStep(s, { stepId: step, start: pos, tokens: [t], phase: Phase.DECODE })))!;
      seen.push(t);
    }
    expect(seen.every((x) => x === 3 || x === 5)).toBe(true);
    // the prefill, the history, then each token as it was sampled
    expect(r.engines[0].grammarTokens).toEqual([3, 5, ...seen]);

    const refused = async (sampling: typeof grammar, id: string) =>
      await d.code(await open(r, 0, id, 1n, { sampling, stepId: 9n }));
    expect(await refused({ ...grammar, grammar: { gbnf: "no grammar", prefill: [] } }, "t")).toBe(
      "malformed",
    );
    expect(await refused({ ...grammar, history: [7] }, "u")).toBe("malformed");
    expect(r.nodes[0].sessionIds()).toEqual(["s"]);
  });

  it("never runs a step id twice: a done step is answered again, a pending one answered once", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    const s = at(r, 0);
    await d.ask(await open(r, 0));
    const step = tokenStep(s, { stepId: 2n, start: 0, tokens: [5, 6] });
    const first = await d.ask(step);
    const again = await d.ask(step);
    expect(again).toEqual(first);
    expect(r.engines[0].calls).toHaveLength(1);
    // a duplicate of a step still in the engine gets no answer of its own
    r.engines[0].pause();
    const pending = tokenStep(s, { stepId: 3n, start: 2, tokens: [7], phase: Phase.DECODE });
    d.link.send(pending);
    await r.engines[0].called(2);
    d.link.send(pending);
    d.link.send(step); // and an old one, while it waits
    r.engines[0].resume();
    const later = await d.ask(tokenStep(s, { stepId: 4n, start: 3, tokens: [8], phase: Phase.DECODE }));
    expect(token(later)).toBe(expectedToken(8, 3));
    expect(d.inbox.items.filter((x) => x.stepId === 3n)).toHaveLength(1);
    expect(d.inbox.items.filter((x) => x.stepId === 2n)).toHaveLength(3);
    expect(r.engines[0].calls.map((c) => c.tokens)).toEqual([[5, 6], [7], [8]]);
  });

  it("refuses a frame at another epoch with wrong_epoch; the session goes on", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    await d.ask(await open(r, 0, "s", 5n));
    expect(await d.code(tokenStep(at(r, 0, "s", 4n), { stepId: 2n, start: 0, tokens: [1] }))).toBe(
      "wrong_epoch",
    );
    expect(await d.code(tokenStep(at(r, 0, "s", 6n), { stepId: 2n, start: 0, tokens: [1] }))).toBe(
      "wrong_epoch",
    );
    expect(await d.code(tokenStep(at(r, 0, "s", 5n), { stepId: 2n, start: 0, tokens: [1] }))).toBe("ok");
  });

  it("a newer epoch supersedes the session's old stream and frees its KV; an older epoch is refused", async () => {
    const r = await route([[0, 4]]);
    const [old, stale, fresh] = [new Driver(r), new Driver(r), new Driver(r)];
    await old.ask(await open(r, 0, "s", 2n));
    await old.ask(tokenStep(at(r, 0, "s", 2n), { stepId: 2n, start: 0, tokens: [1, 2, 3] }));
    expect(await stale.code(await open(r, 0, "s", 1n))).toBe("wrong_epoch");
    expect(await stale.code(await open(r, 0, "s", 2n))).toBe("wrong_epoch");
    expect(await fresh.code(await open(r, 0, "s", 3n))).toBe("ok");
    expect((await old.failure()).status).toMatchObject({ code: "wrong_epoch" });
    expect(r.engines[0].openSequences).toBe(1);
    expect(r.engines[0].cellsUsed).toBe(0);
    // the old stream's session is gone; the new one starts from an empty cache
    expect(await old.code(tokenStep(at(r, 0, "s", 2n), { stepId: 3n, start: 3, tokens: [4] }))).toBe(
      "unknown_session",
    );
    const first = await fresh.ask(tokenStep(at(r, 0, "s", 3n), { stepId: 2n, start: 0, tokens: [9] }));
    expect(token(first)).toBe(expectedToken(9, 0));
  });

  it("refuses positions that do not continue the cache, then takes the right ones", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    const s = at(r, 0);
    await d.ask(await open(r, 0));
    await d.ask(tokenStep(s, { stepId: 2n, start: 0, tokens: [1, 2] }));
    expect(await d.code(tokenStep(s, { stepId: 3n, start: 3, tokens: [3] }))).toBe("bad_position");
    expect(await d.code(tokenStep(s, { stepId: 3n, start: 2, tokens: [3], cacheExpect: 1 }))).toBe(
      "bad_position",
    );
    expect(token(await d.ask(tokenStep(s, { stepId: 3n, start: 2, tokens: [3] })))).toBe(expectedToken(3, 2));
  });

  it("refuses bad frames one by one with a code per cause; the session goes on with the right tokens", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    const s = at(r, 0);
    const before = new Driver(r);
    expect(await before.code(tokenStep(s, { stepId: 2n, start: 0, tokens: [1] }))).toBe("unknown_session");
    await d.ask(await open(r, 0));
    const step = (tokens: number[], extra: (f: SeamFrame) => void = () => {}) => {
      const f = tokenStep(s, { stepId: 2n, start: 0, tokens });
      extra(f);
      return f;
    };
    const codes = {
      noPhase: await d.code(step([1], (f) => (f.phase = Phase.UNSPECIFIED))),
      // a snapshot, or a phase from a newer schema, on the session's stream: refused, not an end
      snapshotHere: await d.code(step([1], (f) => (f.phase = Phase.SNAPSHOT))),
      unknownPhase: await d.code(step([1], (f) => (f.phase = 99 as Phase))),
      schema2: await d.code(step([1], (f) => (f.schemaVersion = 2))),
      otherSession: await d.code(tokenStep({ ...s, sessionId: "t" }, { stepId: 2n, start: 0, tokens: [1] })),
      stepIdZero: await d.code(step([1], (f) => (f.stepId = 0n))),
      outsideVocabulary: await d.code(step([40])),
      twoTensors: await d.code(step([1], (f) => f.tensors.push(f.tensors[0]))),
      wrongName: await d.code(step([1], (f) => (f.tensors[0].name = "hidden_states"))),
      flippedByte: await d.code(step([1], (f) => (f.tensors[0].data[0] ^= 1))),
      oversized: await d.code(step([1], (f) => (f.tensors[0].shape = [1 << 24]))),
      moreIdsThanPositions: await d.code(step([1], (f) => (f.tensors = tokenStep(s, {
        stepId: 2n,
        start: 0,
        tokens: [1, 2],
      }).tensors))),
      decodeOfTwo: await d.code(step([1, 2], (f) => (f.phase = Phase.DECODE))),
      chunkPastCount: await d.code(step([1, 2], (f) => (f.chunkIndex = 1))),
      otherRecipe: await d.code(step([1], (f) => (f.recipeFingerprint = new Uint8Array(32)))),
    };
    expect(codes).toEqual({
      noPhase: "malformed",
      snapshotHere: "malformed",
      unknownPhase: "malformed",
      schema2: "wrong_schema",
      otherSession: "malformed",
      stepIdZero: "malformed",
      outsideVocabulary: "bad_tensor",
      twoTensors: "bad_tensor",
      wrongName: "bad_tensor",
      flippedByte: "checksum",
      oversized: "too_large",
      moreIdsThanPositions: "bad_tensor",
      decodeOfTwo: "malformed",
      chunkPastCount: "malformed",
      otherRecipe: "wrong_recipe",
    });
    expect(r.engines[0].calls).toHaveLength(0);
    expect(token(await d.ask(step([6])))).toBe(expectedToken(6, 0));
    expect((await r.nodes[0].info()).refusedFrames).toBe(16n);
  });

  it("on a later shard, refuses hidden states of the wrong width or row count", async () => {
    const r = await route([[2, 4]]);
    const d = new Driver(r);
    const s: Addressed = { sessionId: "s", range: r.ranges[0] };
    await d.ask(
      openFrame(s, {
        ticket: await ticketFor({ sessionId: "s", epoch: 1n, range: r.ranges[0] }),
        kvCells: 64,
      }),
    );
    const wide = hiddenStep(s, { stepId: 2n, start: 0, tokens: [1] });
    wide.tensors = [packTensor("hidden_states", new Float32Array(100), [1, 100])];
    expect(await d.code(wide)).toBe("bad_tensor");
    const short = hiddenStep(s, { stepId: 2n, start: 0, tokens: [1, 2] });
    short.positions!.count = 3;
    expect(await d.code(short)).toBe("bad_tensor");
    expect(token(await d.ask(hiddenStep(s, { stepId: 2n, start: 0, tokens: [1, 2] })))).toBe(
      expectedToken(2, 1),
    );
  });

  it("pushes back a session past its queue bound with overloaded; the step may be sent again", async () => {
    const r = await route([[0, 4]], { limits: { maxQueuedPerSession: 2 } });
    const d = new Driver(r);
    const s = at(r, 0);
    await d.ask(await open(r, 0));
    const chunk = (i: number) =>
      tokenStep(s, { stepId: BigInt(2 + i), start: 2 * i, tokens: [i, i], chunkIndex: i, chunkCount: 4 });
    r.engines[0].pause();
    d.link.send(chunk(0));
    await r.engines[0].called(1);
    d.link.send(chunk(1));
    d.link.send(chunk(2));
    expect(await d.code(chunk(3))).toBe("overloaded");
    r.engines[0].resume();
    await d.inbox.until((x) => x.stepId === 4n);
    const last = await d.ask(chunk(3));
    expect(last.status).toBeUndefined();
    expect(token(last)).toBe(expectedToken(3, 7));
  });

  it("refuses a step past the session's cells with context_full; the session stays open", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    const s = at(r, 0);
    await d.ask(await open(r, 0, "s", 1n, { kvCells: 3 }));
    await d.ask(tokenStep(s, { stepId: 2n, start: 0, tokens: [1, 2, 3] }));
    expect(await d.code(tokenStep(s, { stepId: 3n, start: 3, tokens: [4] }))).toBe("context_full");
    expect(r.nodes[0].sessionIds()).toEqual(["s"]);
  });

  // a session preempted between steps (idle here while its step is further down the route, the
  // usual case) must hear context_full at its next step, which the gateway ends with finish_reason
  // "length"; it once heard unknown_session, an error instead of its text
  it("tells a session preempted between steps that its cells ran out (context_full)", async () => {
    const r = await route([[0, 4]], { limits: { kvCells: 8 } });
    const [a, b] = [new Driver(r), new Driver(r)];
    await a.ask(await open(r, 0, "a", 1n, { kvCells: 8 }));
    await b.ask(await open(r, 0, "b", 1n, { kvCells: 8 }));
    await a.ask(tokenStep(at(r, 0, "a"), { stepId: 2n, start: 0, tokens: [1, 1, 1, 1] }));
    await b.ask(tokenStep(at(r, 0, "b"), { stepId: 2n, start: 0, tokens: [2, 2, 2, 2] }));
    // a's next token needs a cell: b, the younger, gives way
    await a.ask(tokenStep(at(r, 0, "a"), { stepId: 3n, start: 4, tokens: [1] }));
    expect(await b.code(tokenStep(at(r, 0, "b"), { stepId: 3n, start: 4, tokens: [2] }))).toBe(
      "context_full",
    );
  });
});

describe("shard node: forwarding", () => {
  it("sends its rows to the next shard and passes the token back with both nodes' telemetry", async () => {
    const r = await route([[0, 2], [2, 4]]);
    const d = new Driver(r);
    await d.ask(await open(r, 0));
    const reply = await d.ask(tokenStep(at(r, 0), { stepId: 2n, start: 0, tokens: [4, 2] }));
    expect(token(reply)).toBe(expectedToken(2, 1));
    expect(reply.telemetry.map((t) => t.node)).toEqual(["n1", "n0"]);
    const [down] = r.seams.to("http://n1");
    const sent = down.sent[1];
    expect(sent).toMatchObject({
      range: { start: 2, end: 4 },
      stepId: 2n,
      recipeFingerprint: r.engines[0].recipe,
    });
    const rows = unpackTensor(sent.tensors[0], { name: "hidden_states", elementType: ElementType.F32 });
    expect(rows.values).toEqual(hiddenRows([4, 2], 0, 2));
    expect(reply.telemetry[1].bytesOut).toBe(2 * 8 * 4);
    // a duplicate is answered here, from memory, and not sent down again
    expect(await d.ask(tokenStep(at(r, 0), { stepId: 2n, start: 0, tokens: [4, 2] }))).toEqual(reply);
    expect(down.sent).toHaveLength(2);
  });

  it("an admission probe gets the shard's output back instead of forwarding it", async () => {
    const r = await route([[0, 2], [2, 4]]);
    const d = new Driver(r);
    await d.ask(await open(r, 0, "p", 1n, { next: [], probe: true }));
    const reply = await d.ask(tokenStep(at(r, 0, "p"), { stepId: 2n, start: 0, tokens: [9, 8, 7] }));
    const out = unpackTensor(reply.tensors[0], { name: "hidden_states", elementType: ElementType.F32 });
    expect(out.shape).toEqual([3, 8]);
    expect(out.values).toEqual(hiddenRows([9, 8, 7], 0, 2));
    expect(r.seams.to("http://n1")).toEqual([]);
  });

  it("when the next shard goes away, tells the stream (unavailable) and frees the session", async () => {
    const r = await route([[0, 2], [2, 4]]);
    const d = new Driver(r);
    await d.ask(await open(r, 0));
    await d.ask(tokenStep(at(r, 0), { stepId: 2n, start: 0, tokens: [1, 2] }));
    r.seams.to("http://n1")[0].vanish("connection reset");
    expect((await d.failure()).status).toMatchObject({ code: "unavailable", message: /connection reset/ });
    expect(r.nodes[0].sessionIds()).toEqual([]);
    expect(r.engines[0].cellsUsed).toBe(0);
  });

  it("refuses OPEN with unavailable when the next hop cannot be dialed, or fails the session if nobody answers", async () => {
    const r = await route([[0, 2], [2, 4]]);
    r.seams.refuseDial.add("http://n1");
    const d = new Driver(r);
    expect(await d.code(await open(r, 0))).toBe("unavailable");
    expect(r.nodes[0].sessionIds()).toEqual([]);
    const nobody = await route([[0, 2]]);
    const e = new Driver(nobody);
    const next = await signedHops([{ url: "http://n1", range: { start: 2, end: 4 } }], "s");
    e.link.send(await open(nobody, 0, "s", 1n, { next }));
    expect((await e.failure()).status).toMatchObject({ code: "unavailable", message: /ECONNREFUSED/ });
    expect(nobody.nodes[0].sessionIds()).toEqual([]);
    expect(nobody.engines[0].openSequences).toBe(0);
  });

  it("passes a session failure from further down the route up, and frees the session here too", async () => {
    const r = await route([[0, 2], [2, 4]]);
    const d = new Driver(r);
    await d.ask(await open(r, 0));
    await d.ask(tokenStep(at(r, 0), { stepId: 2n, start: 0, tokens: [1, 2] }));
    await r.nodes[1].close(); // n1 tells its streams it is going away
    expect((await d.failure()).status).toMatchObject({ code: "unavailable", message: /shutting down/ });
    expect(r.nodes[0].sessionIds()).toEqual([]);
    expect(r.engines.map((e) => e.cellsUsed)).toEqual([0, 0]);
  });
});

describe("shard node: release, cancel and the end of streams", () => {
  it("RELEASE frees each node's KV at once, travels down and is answered from the end of the route", async () => {
    const r = await route([[0, 2], [2, 4]]);
    const d = new Driver(r);
    await d.ask(await open(r, 0));
    await d.ask(tokenStep(at(r, 0), { stepId: 2n, start: 0, tokens: [1, 2, 3] }));
    expect(r.engines.map((e) => e.cellsUsed)).toEqual([3, 3]);
    const reply = await d.ask(releaseFrame(at(r, 0), 3n));
    expect(reply.status).toBeUndefined();
    expect(r.engines.map((e) => [e.cellsUsed, e.openSequences])).toEqual([[0, 0], [0, 0]]);
    expect(r.nodes.map((n) => n.sessionIds())).toEqual([[], []]);
    expect(r.seams.to("http://n1")[0].closed).toBe(true);
    expect(await d.code(tokenStep(at(r, 0), { stepId: 4n, start: 3, tokens: [4] }))).toBe("unknown_session");
  });

  it("CANCEL mid-step refuses the queued steps (cancelled), frees the KV, and other sessions carry on", async () => {
    const r = await route([[0, 4]]);
    const [a, b] = [new Driver(r), new Driver(r)];
    await a.ask(await open(r, 0, "a"));
    await b.ask(await open(r, 0, "b"));
    const e = r.engines[0];
    e.pause();
    a.link.send(
      tokenStep(at(r, 0, "a"), { stepId: 2n, start: 0, tokens: [1, 1], chunkIndex: 0, chunkCount: 2 }),
    );
    await e.called(1);
    a.link.send(
      tokenStep(at(r, 0, "a"), { stepId: 3n, start: 2, tokens: [1], chunkIndex: 1, chunkCount: 2 }),
    );
    b.link.send(tokenStep(at(r, 0, "b"), { stepId: 2n, start: 0, tokens: [5] }));
    const cancelled = a.ask(releaseFrame(at(r, 0, "a"), 4n, Phase.CANCEL));
    expect((await a.inbox.until((x) => x.stepId === 3n)).status).toMatchObject({ code: "cancelled" });
    e.resume();
    expect((await cancelled).status).toBeUndefined();
    expect(token(await b.inbox.until((x) => x.stepId === 2n))).toBe(expectedToken(5, 0));
    expect(r.nodes[0].sessionIds()).toEqual(["b"]);
    expect([e.cellsUsed, e.openSequences]).toEqual([1, 1]);
    // the step already in the engine when CANCEL came still finishes, and is answered before it
    expect(a.inbox.items.map((x) => [x.stepId, x.status?.code ?? "ok"])).toEqual([
      [1n, "ok"],
      [3n, "cancelled"],
      [2n, "ok"],
      [4n, "ok"],
    ]);
  });

  it("frees a session whose stream ends without a release", async () => {
    const r = await route([[0, 2], [2, 4]]);
    const d = new Driver(r);
    await d.ask(await open(r, 0));
    await d.ask(tokenStep(at(r, 0), { stepId: 2n, start: 0, tokens: [1, 2] }));
    d.link.close();
    await d.link.done;
    expect(r.nodes[0].sessionIds()).toEqual([]);
    expect(r.engines[0].cellsUsed).toBe(0);
    // the node tore its own stream down, so the next node frees the session as well
    expect(r.seams.to("http://n1")[0].aborted).toMatch(/ended the stream without a release/);
    await r.seams.to("http://n1")[0].done;
    expect(r.engines[1].cellsUsed).toBe(0);
  });

  it("frees a session whose stream fails (a frame past the transport's limit), and serves on", async () => {
    const r = await route([[0, 4]]);
    r.seams.maxFrameBytes = 1_000;
    const d = new Driver(r);
    await d.ask(await open(r, 0));
    d.link.send(tokenStep(at(r, 0), { stepId: 2n, start: 0, tokens: Array(300).fill(1) }));
    await d.link.done;
    expect(d.inbox.error).toMatchObject({ code: "resource_exhausted" });
    expect(r.nodes[0].sessionIds()).toEqual([]);
    // a failed session may be opened again at its epoch (a driver re-prefilling the same route)
    const again = new Driver(r);
    expect(await again.code(await open(r, 0))).toBe("ok");
  });

  it("refuses an OPEN replayed after its session was released, with its ticket still valid", async () => {
    const r = await route([[0, 4]]);
    const d = new Driver(r);
    const first = await open(r, 0);
    expect(await d.code(first)).toBe("ok");
    expect(await d.code(releaseFrame(at(r, 0), 2n))).toBe("ok");
    const replay = new Driver(r);
    expect((await replay.ask(first)).status).toMatchObject({
      code: "wrong_epoch",
      message: "session s ended here at epoch 1",
    });
    expect(r.nodes[0].sessionIds()).toEqual([]);
    // a cancelled session is not kept: its driver may open it again at that epoch
    expect(await d.code(await open(r, 0, "c"))).toBe("ok");
    expect(await d.code(releaseFrame(at(r, 0, "c"), 2n, Phase.CANCEL))).toBe("ok");
    expect(await new Driver(r).code(await open(r, 0, "c"))).toBe("ok");
  });

  it("expires a session idle past its lease and tells its stream (expired)", async () => {
    vi.useFakeTimers();
    const r = await route([[0, 2], [2, 4]], { leaseMs: 1_000 });
    const d = new Driver(r);
    await d.ask(await open(r, 0));
    await d.ask(tokenStep(at(r, 0), { stepId: 2n, start: 0, tokens: [1, 2] }));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(r.nodes[0].sessionIds()).toEqual(["s"]);
    await vi.advanceTimersByTimeAsync(500);
    expect((await d.failure()).status).toMatchObject({ code: "expired" });
    expect(r.nodes[0].sessionIds()).toEqual([]);
    expect(r.engines[0].cellsUsed).toBe(0);
    expect(r.seams.to("http://n1")[0].aborted).toBe("lease expired");
  });

  it("lets a session go that was opened and never given a step, long before its lease", async () => {
    vi.useFakeTimers();
    const r = await route([[0, 2], [2, 4]], { leaseMs: 600_000, unusedMs: 2_000 });
    const idle = new Driver(r);
    await idle.ask(await open(r, 0, "idle"));
    const used = new Driver(r);
    await used.ask(await open(r, 0, "used"));
    await used.ask(tokenStep(at(r, 0, "used"), { stepId: 2n, start: 0, tokens: [1, 2] }));
    await vi.advanceTimersByTimeAsync(1_500);
    expect(r.nodes[0].sessionIds().sort()).toEqual(["idle", "used"]);
    await vi.advanceTimersByTimeAsync(1_500);
    expect((await idle.failure()).status).toMatchObject({ code: "expired" });
    expect(r.nodes[0].sessionIds()).toEqual(["used"]);
    // the next shard's copy goes too (the stream to it ends), the used session stays
    expect(r.nodes[1].sessionIds()).toEqual(["used"]);
  });

  it("on close, tells every session's stream it is going away and frees them", async () => {
    const r = await route([[0, 4]]);
    const [a, b] = [new Driver(r), new Driver(r)];
    await a.ask(await open(r, 0, "a"));
    await b.ask(await open(r, 0, "b"));
    await r.nodes[0].close();
    for (const d of [a, b]) expect((await d.failure()).status).toMatchObject({ code: "unavailable" });
    expect([r.engines[0].openSequences, r.nodes[0].sessionIds().length]).toEqual([0, 0]);
  });
});
