// A route that loses one node resumes on a repaired route: the nodes still there keep their
// KV (parked), the node that joins is rebuilt from what the shard before it sent on (or from
// the tokens when it is the first), and the tokens go on exactly as without the loss. A node
// that joins with a KV snapshot of the session (a standby that took one) is rebuilt only past it.
import { afterEach, describe, expect, it, vi } from "vitest";
import type { SeamFrame } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { ShardNode } from "../../src/node/shard-node.ts";
import { prefixBlocks } from "../../src/route/prefix-keys.ts";
import { RouteSession, type SessionOptions } from "../../src/route/route-session.ts";
import { askSnapshot } from "../../src/route/snapshot-request.ts";
import type { SeamLink } from "../../src/seam/link.ts";
import { expectedToken, FakeEngine } from "../fakes/fake-engine.ts";
import { MemorySeams } from "../fakes/memory-seams.ts";
import { ARTIFACT, routeKey, signedHops } from "../fakes/route-keys.ts";

vi.setConfig({ testTimeout: 5_000 });

const RANGES = { a: { start: 0, end: 1 }, b: { start: 1, end: 3 }, c: { start: 3, end: 4 } } as const;
type Part = keyof typeof RANGES;

const created: ShardNode[] = [];
afterEach(async () => {
  for (const n of created.splice(0)) await n.close();
});

interface NetworkOptions {
  /** nodes keep prefix entries (a batch-invariant engine): they send and take KV snapshots */
  readonly keeps?: boolean;
  /** an engine recipe other than the fakes' for this node */
  readonly recipe?: (name: string) => Uint8Array | undefined;
}

/** Nodes http://a0, http://b0, http://c0 (the route) and a spare of each range (a1, b1, c1). */
async function network(parkMs = 5_000, spareBatchTokens = 64, o: NetworkOptions = {}) {
  const seams = new MemorySeams();
  const { publicKey } = await routeKey();
  const nodes = new Map<string, { node: ShardNode; engine: FakeEngine }>();
  // what the nodes' own links send passes through this (a test that flips a byte on the way)
  const net = { tamper: undefined as ((f: SeamFrame) => SeamFrame) | undefined };
  const dial = (url: string): SeamLink => {
    const l = seams.dial(url);
    return {
      transport: l.transport,
      send: (f) => l.send(net.tamper ? net.tamper(f) : f),
      replies: l.replies,
      close: () => l.close(),
      abort: (why) => l.abort(why),
    };
  };
  for (const part of ["a", "b", "c"] as Part[]) {
    for (const i of [0, 1]) {
      const engine = new FakeEngine({
        range: RANGES[part],
        // a native CPU engine: it keeps prefixes and takes snapshots
        kind: o.keeps ? "native" : undefined,
        backend: o.keeps ? "cpu" : undefined,
        recipe: o.recipe?.(`${part}${i}`),
      });
      const node = new ShardNode(engine, {
        nodeId: `${part}${i}`,
        artifactSha256: ARTIFACT,
        routeKey: publicKey,
        dial,
        limits: {
          maxBatchTokens: i === 0 ? 64 : spareBatchTokens,
          maxQueuedPerSession: 8,
          kvCells: 256,
          prefix: o.keeps ? { entries: 4, cells: 192 } : undefined,
        },
        leaseMs: 60_000,
        parkMs,
      });
      created.push(node);
      seams.listen(`http://${part}${i}`, node.serve);
      nodes.set(`${part}${i}`, { node, engine });
    }
  }
  const hops = (names: string[], epoch: bigint, session = "s") =>
    signedHops(names.map((n) => ({ url: `http://${n}`, range: RANGES[n[0] as Part] })), session, epoch);
  return { seams, nodes, hops, net };
}

// a driver that repairs routes: the shards park its session when the route breaks
const options = (epoch: bigint): SessionOptions => ({
  sessionId: "s",
  epoch,
  artifactSha256: ARTIFACT,
  kvCells: 64,
  parkOnLoss: true,
});

/** The fake model's greedy tokens after a prompt. */
function predicted(prompt: number[], n: number): number[] {
  const out: number[] = [];
  let t = prompt[prompt.length - 1], pos = prompt.length - 1;
  for (let i = 0; i < n; i++) out.push(t = expectedToken(t, pos++));
  return out;
}

/** Positions each engine was asked to compute, in order. */
const computed = (e: FakeEngine) => e.calls.flatMap((c) => c.pos);

const PROMPT = [1, 2, 3];

/** A session that prefilled the prompt and decoded until it has `n` tokens (the last not yet fed). */
async function started(net: Awaited<ReturnType<typeof network>>, names: string[], n: number) {
  const s = await RouteSession.open(net.seams.dial, await net.hops(names, 1n), options(1n));
  const out: number[] = [];
  let r = await s.prefill(Int32Array.from(PROMPT));
  out.push(r.token);
  while (out.length < n) {
    r = await s.decode(r.token);
    out.push(r.token);
  }
  return { s, out };
}

/** Breaks every seam into `name` (its upstream) and every seam it opened (its downstream). */
function kill(net: Awaited<ReturnType<typeof network>>, name: string, range: { start: number; end: number }) {
  for (const l of net.seams.links) {
    const into = l.url === `http://${name}`;
    // a node's downstream links carry frames for the range right after its own
    const outOf = !into && l.sent[0]?.open !== undefined && l.sent[0].range?.start === range.end;
    if (into || outOf) l.vanish(`${name} is gone`);
  }
}

describe("route repair: resuming on a repaired route", () => {
  it("a middle node lost: the others keep their KV, the spare is rebuilt from the first node's outputs", async () => {
    const net = await network();
    const { s, out } = await started(net, ["a0", "b0", "c0"], 5);
    expect(out).toEqual(predicted(PROMPT, 5));
    const a = net.nodes.get("a0")!.engine, c = net.nodes.get("c0")!.engine;
    const [aBefore, cBefore] = [a.calls.length, c.calls.length];
    kill(net, "b0", RANGES.b);
    await expect(s.decode(out[4])).rejects.toMatchObject({ code: "unavailable" });
    s.detach();
    await vi.waitFor(() => expect(net.nodes.get("c0")!.node.sessionIds()).toEqual(["s"]));

    const held = Int32Array.from([...PROMPT, ...out.slice(0, 4)]); // 7 positions; out[4] not fed yet
    const { session, replayedByDriver } = await RouteSession.resume(
      net.seams.dial,
      await net.hops(["a0", "b1", "c0"], 2n),
      options(2n),
      held,
    );
    expect(replayedByDriver).toBe(0);
    // the spare computed the 7 positions; nobody else computed anything again
    expect(computed(net.nodes.get("b1")!.engine)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect([a.calls.length - aBefore, c.calls.length - cBefore]).toEqual([0, 0]);
    const more: number[] = [];
    for await (const r of session.generate(Int32Array.from([...PROMPT, ...out]), 3, () => false)) {
      more.push(r.token);
    }
    expect([...out, ...more]).toEqual(predicted(PROMPT, 8));
    await session.release();
    for (const n of ["a0", "b1", "c0"]) {
      expect([n, net.nodes.get(n)!.engine.cellsUsed, net.nodes.get(n)!.node.sessionIds()]).toEqual([
        n,
        0,
        [],
      ]);
    }
  });

  it("the first node lost: the driver gives the spare the tokens again", async () => {
    const net = await network();
    const { s, out } = await started(net, ["a0", "b0", "c0"], 4);
    kill(net, "a0", RANGES.a);
    await expect(s.decode(out[3])).rejects.toMatchObject({ code: "unavailable" });
    s.detach();
    await vi.waitFor(() => expect(net.nodes.get("b0")!.node.sessionIds()).toEqual(["s"]));
    const held = Int32Array.from([...PROMPT, ...out.slice(0, 3)]);
    const { session, replayedByDriver } = await RouteSession.resume(
      net.seams.dial,
      await net.hops(["a1", "b0", "c0"], 2n),
      options(2n),
      held,
    );
    expect(replayedByDriver).toBe(6);
    const more: number[] = [];
    for await (const r of session.generate(Int32Array.from([...PROMPT, ...out]), 2, () => false)) {
      more.push(r.token);
    }
    expect([...out, ...more]).toEqual(predicted(PROMPT, 6));
    await session.cancel();
  });

  it("a step some hops ran before the loss is taken back (the KV trimmed), then run again", async () => {
    const net = await network();
    const { s, out } = await started(net, ["a0", "b0", "c0"], 3);
    const c = net.nodes.get("c0")!.engine;
    c.pause();
    const inFlight = s.decode(out[2]).catch((e) => e);
    await c.called(c.calls.length + 1); // a0 and b0 ran position 5; c0 holds it
    kill(net, "c0", RANGES.c);
    c.resume(); // what the lost node computes goes nowhere
    expect(await inFlight).toMatchObject({ code: "unavailable" });
    s.detach();
    await vi.waitFor(() => expect(net.nodes.get("b0")!.node.sessionIds()).toEqual(["s"]));
    const held = Int32Array.from([...PROMPT, ...out.slice(0, 2)]); // 5 positions
    const { session } = await RouteSession.resume(
      net.seams.dial,
      await net.hops(["a0", "b0", "c1"], 2n),
      options(2n),
      held,
    );
    expect(computed(net.nodes.get("c1")!.engine)).toEqual([0, 1, 2, 3, 4]);
    const more: number[] = [];
    for await (const r of session.generate(Int32Array.from([...PROMPT, ...out]), 2, () => false)) {
      more.push(r.token);
    }
    expect([...out, ...more]).toEqual(predicted(PROMPT, 5));
    // a0 and b0 ran position 5 twice: before the loss, and again after the trim
    expect(computed(net.nodes.get("a0")!.engine).filter((p) => p === 5)).toHaveLength(2);
    await session.release();
    expect(net.nodes.get("b0")!.engine.cellsUsed).toBe(0);
  });

  it("parking ends: a resume finds nothing kept and says so (the caller re-prefills the whole route)", async () => {
    const net = await network(100);
    const { s, out } = await started(net, ["a0", "b0", "c0"], 3);
    kill(net, "b0", RANGES.b);
    await expect(s.decode(out[2])).rejects.toMatchObject({ code: "unavailable" });
    s.detach();
    await vi.waitFor(() => expect(net.nodes.get("c0")!.node.sessionIds()).toEqual([]), { timeout: 2_000 });
    expect(net.nodes.get("a0")!.engine.cellsUsed).toBe(0);
    await expect(
      RouteSession.resume(
        net.seams.dial,
        await net.hops(["a0", "b1", "c0"], 2n),
        options(2n),
        Int32Array.from([...PROMPT, ...out.slice(0, 2)]),
      ),
    ).rejects.toMatchObject({ code: "resume_failed" });
    for (const n of ["a0", "b1", "c0"]) expect(net.nodes.get(n)!.node.sessionIds()).toEqual([]);
  });

  it("a spare that cannot take the rebuild refuses it: the resume fails at once, nothing waits", async () => {
    const net = await network(5_000, 4);
    const { s, out } = await started(net, ["a0", "b0", "c0"], 5);
    kill(net, "b0", RANGES.b);
    await expect(s.decode(out[4])).rejects.toMatchObject({ code: "unavailable" });
    s.detach();
    await vi.waitFor(() => expect(net.nodes.get("c0")!.node.sessionIds()).toEqual(["s"]));
    // b1 takes 4 tokens a step: the 7 positions a0 replays in one chunk are refused
    await expect(
      RouteSession.resume(
        net.seams.dial,
        await net.hops(["a0", "b1", "c0"], 2n),
        options(2n),
        Int32Array.from([...PROMPT, ...out.slice(0, 4)]),
      ),
    ).rejects.toMatchObject({ code: "resume_failed", message: /\[7, 0, 7\]/ });
  });

  it("a session whose driver does not repair is freed at once when its route breaks", async () => {
    const net = await network();
    const s = await RouteSession.open(net.seams.dial, await net.hops(["a0", "b0", "c0"], 1n), {
      ...options(1n),
      parkOnLoss: false,
    });
    const r = await s.prefill(Int32Array.from(PROMPT));
    kill(net, "b0", RANGES.b);
    await expect(s.decode(r.token)).rejects.toMatchObject({ code: "unavailable" });
    for (const n of ["a0", "c0"]) {
      await vi.waitFor(() => expect(net.nodes.get(n)!.node.sessionIds()).toEqual([]));
      expect(net.nodes.get(n)!.engine.cellsUsed).toBe(0);
    }
  });

  it("a driver frees a parked session with the old epoch's ticket", async () => {
    const net = await network();
    const { s, out } = await started(net, ["a0", "b0", "c0"], 2);
    kill(net, "b0", RANGES.b);
    await expect(s.decode(out[1])).rejects.toMatchObject({ code: "unavailable" });
    s.detach();
    await vi.waitFor(() => expect(net.nodes.get("c0")!.node.sessionIds()).toEqual(["s"]));
    const old = await net.hops(["a0", "b0", "c0"], 1n);
    await RouteSession.releaseParked(net.seams.dial, old[2], options(1n));
    await RouteSession.releaseParked(net.seams.dial, old[0], options(1n));
    for (const n of ["a0", "c0"]) {
      expect([net.nodes.get(n)!.node.sessionIds(), net.nodes.get(n)!.engine.cellsUsed]).toEqual([[], 0]);
    }
  });
});

describe("route repair from a KV snapshot", () => {
  // 150 tokens: the OPEN offers the blocks of all but the last, two whole blocks (128 positions)
  const LONG = Array.from({ length: 150 }, (_, i) => (i * 5) % 32);

  /** The route a0 → b0 → c0 with LONG prefilled and `n` tokens out, offered as prefix blocks. */
  async function long(net: Awaited<ReturnType<typeof network>>, n: number) {
    const o = { ...options(1n), kvCells: 200, prefixOf: Int32Array.from(LONG), prefillChunk: 64 };
    const s = await RouteSession.open(net.seams.dial, await net.hops(["a0", "b0", "c0"], 1n), o);
    const out: number[] = [];
    let r = await s.prefill(Int32Array.from(LONG));
    out.push(r.token);
    while (out.length < n) out.push((r = await s.decode(r.token)).token);
    return { s, out };
  }

  /** b0 sends the session's first 128 positions to `to` (the standby's ticket names "s/mirror"). */
  async function snapshot(net: Awaited<ReturnType<typeof network>>, to = "b1", range = RANGES.b) {
    const [from] = (await net.hops(["a0", "b0", "c0"], 1n)).slice(1);
    const [standby] = await signedHops([{ url: `http://${to}`, range }], "s/mirror", 1n);
    return await askSnapshot(net.seams.dial, {
      sessionId: "s",
      epoch: 1n,
      artifactSha256: ARTIFACT,
      from,
      to: standby,
      blocks: await prefixBlocks(Int32Array.from(LONG.slice(0, -1))),
    });
  }

  /** b0 lost; the session resumes on a0 → b1 → c0 (offering its blocks). */
  async function loseB0AndResume(net: Awaited<ReturnType<typeof network>>, s: RouteSession, out: number[]) {
    kill(net, "b0", RANGES.b);
    await expect(s.decode(out[out.length - 1])).rejects.toMatchObject({ code: "unavailable" });
    s.detach();
    await vi.waitFor(() => expect(net.nodes.get("c0")!.node.sessionIds()).toEqual(["s"]));
    const held = Int32Array.from([...LONG, ...out.slice(0, -1)]);
    const o = { ...options(2n), kvCells: 200, prefixOf: held, prefillChunk: 64 };
    return {
      held,
      ...await RouteSession.resume(net.seams.dial, await net.hops(["a0", "b1", "c0"], 2n), o, held),
    };
  }

  const info = (net: Awaited<ReturnType<typeof network>>, name: string) => net.nodes.get(name)!.node.info();

  /** The session's next `n` tokens after `prompt` (what it does not hold yet of it is fed first). */
  async function tokens(s: RouteSession, prompt: number[], n: number): Promise<number[]> {
    const out: number[] = [];
    for await (const r of s.generate(Int32Array.from(prompt), n, () => false)) out.push(r.token);
    return out;
  }

  it("the standby of the lost node joins from its snapshot: only the positions past it are rebuilt", async () => {
    const net = await network(5_000, 256, { keeps: true });
    const { s, out } = await long(net, 4);
    expect(await snapshot(net)).toBe(128);
    expect((await info(net, "b1")).prefix).toMatchObject({ entries: 1, cells: 128, snapshotsTaken: 1n });
    expect((await info(net, "b0")).prefix?.snapshotsSent).toBe(1n);

    const { session, fromEntries, held } = await loseB0AndResume(net, s, out);
    expect(fromEntries).toEqual([0, 128, 0]);
    // the standby computed the 25 positions past its snapshot, from a0's outputs
    const b1 = net.nodes.get("b1")!.engine;
    expect(computed(b1)).toEqual(Array.from({ length: held.length - 128 }, (_, i) => 128 + i));
    // the tokens go on as without the loss
    expect([...out, ...await tokens(session, [...LONG, ...out], 3)]).toEqual(predicted(LONG, 7));
    await session.release();
  });

  it("a snapshot with a flipped byte is refused and nothing is kept: the repair replays it all", async () => {
    const net = await network(5_000, 256, { keeps: true });
    const { s, out } = await long(net, 3);
    net.net.tamper = (f) => {
      if (!f.snapshot?.chunk.length) return f;
      const chunk = f.snapshot.chunk.slice();
      chunk[20] ^= 0x10;
      return { ...f, snapshot: { ...f.snapshot, chunk } };
    };
    await expect(snapshot(net)).rejects.toMatchObject({ code: "checksum" });
    net.net.tamper = undefined;
    expect((await info(net, "b1")).prefix).toMatchObject({
      entries: 0,
      snapshotsTaken: 0n,
      snapshotsRefused: 1n,
    });
    const { session, fromEntries, held } = await loseB0AndResume(net, s, out);
    expect(fromEntries).toEqual([0, 0, 0]);
    expect(computed(net.nodes.get("b1")!.engine)).toEqual(Array.from({ length: held.length }, (_, i) => i));
    // the tokens go on as without the loss
    expect([...out, ...await tokens(session, [...LONG, ...out], 2)]).toEqual(predicted(LONG, 5));
    await session.release();
  });

  it("a draining node hands its prefix entries to a node of its range: a prompt that extends them starts there", async () => {
    const net = await network(5_000, 256, { keeps: true });
    const { s } = await long(net, 2);
    await s.release(); // every shard keeps the session's KV as a prefix entry
    await vi.waitFor(async () => expect((await info(net, "b0")).prefix?.entries).toBe(1));
    const [to] = await signedHops([{ url: "http://b1", range: RANGES.b }], "handover/b0", 1n);
    expect(await net.nodes.get("b0")!.node.handOver({ ...to, routeTicket: to.ticket, node: "b1" })).toBe(1);
    expect((await info(net, "b1")).prefix).toMatchObject({ entries: 1, snapshotsTaken: 1n });
    // the same prompt again, through b1 instead of b0: every shard holds its first two blocks
    const again = await RouteSession.open(net.seams.dial, await net.hops(["a0", "b1", "c0"], 1n, "t"), {
      ...options(1n),
      sessionId: "t",
      kvCells: 200,
      prefixOf: Int32Array.from(LONG),
      prefillChunk: 64,
    });
    expect(again.reused).toBe(128);
    expect(await tokens(again, LONG, 2)).toEqual(predicted(LONG, 2));
    expect(computed(net.nodes.get("b1")!.engine)).toEqual(Array.from({ length: 23 }, (_, i) => 128 + i));
    await again.release();
  });

  it("a snapshot for another engine recipe or another range is refused", async () => {
    const other = new Uint8Array(32).fill(0x11);
    const net = await network(5_000, 256, { keeps: true, recipe: (n) => (n === "b1" ? other : undefined) });
    const { s } = await long(net, 2);
    await expect(snapshot(net)).rejects.toMatchObject({ code: "wrong_recipe" });
    expect((await info(net, "b1")).prefix).toMatchObject({ entries: 0, snapshotsRefused: 1n });
    // a node of another range, named as if it held b's layers: it refuses the frames as not its own
    await expect(snapshot(net, "a1")).rejects.toMatchObject({ code: "wrong_shard" });
    expect((await info(net, "a1")).prefix?.entries).toBe(0);
    // asked to send to a hop of another range, the shard sends nothing
    await expect(snapshot(net, "a1", RANGES.a)).rejects.toMatchObject({ code: "wrong_shard" });
    expect((await info(net, "b0")).prefix?.snapshotsSent).toBe(0n);
    await s.release();
  });
});
