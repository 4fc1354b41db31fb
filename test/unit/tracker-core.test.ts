// The tracker's core without a process: registrations, admissions, leases, load, routes,
// hop URLs, seam compression and volunteer assignments, over memory storage, a fake probe
// and a clock the test moves.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { layerRange } from "../../src/engine/layer-range.ts";
import { PIPELINE_MIN_CHUNK } from "../../src/route/prefill-pipeline.ts";
import { Compression } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import {
  DoneRequestSchema,
  HeartbeatRequestSchema,
  LeaveRequestSchema,
  type NodeState,
  PlaceRequestSchema,
  RegisterRequestSchema,
  RouteRequestSchema,
} from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { buildManifest } from "../../src/gguf/manifest.ts";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { synthModel } from "../../src/model/synth.ts";
import { importPublicRouteKey } from "../../src/route/keys.ts";
import { verifyTicket } from "../../src/route/ticket.ts";
import type { ProbeTarget } from "../../src/tracker/admission/admission.ts";
import { TrackerError } from "../../src/tracker/errors.ts";
import { hopUrls } from "../../src/tracker/routes/hop-urls.ts";
import { checkNodeToken } from "../../src/tracker/membership/node-token.ts";
import type { ProbeVerdict } from "../../src/tracker/admission/probe.ts";
import { shardMemory } from "../../src/engine/memory-cap.ts";
import { MAX_DONE_SESSIONS } from "../../src/tracker/routes/session-ends.ts";
import { gaps } from "../../src/tracker/placement/placement.ts";
import { routeCompression } from "../../src/tracker/routes/route-compression.ts";
import { type Beat, MemoryStorage, type PlanEntry } from "../../src/tracker/membership/storage.ts";
import { PLAN_BATCH_MS } from "../../src/tracker/placement/placer.ts";
import { BlockEpochs, ClockEpochs } from "../../src/tracker/routes/epochs.ts";
import { TrackerCore, type TrackerCoreOptions } from "../../src/tracker/core/tracker-core.ts";
import {
  offeredRanges,
  TAB_ENGINE,
  volunteerAssignment,
} from "../../src/tracker/placement/volunteer-assignment.ts";

const ARTIFACT = "ab".repeat(32);
const file = synthModel({ arch: "qwen3", nLayer: 6 });
const header = parseGgufHeader(file);
const shape = kvShape(header);
const manifest = buildManifest(header, file.length, ARTIFACT);
const model = { artifact: ARTIFACT, nLayer: shape.nLayer, manifest, kv: shape.layers };
const LEASE_MS = 2_000;

const pass: ProbeVerdict = { ok: true, maxAbsDiff: 0, allowed: 1, detail: "max |Δ| 0" };

/** A core on memory storage whose clock the test moves; probes pass unless `probe` says. */
async function tracker(o: Partial<TrackerCoreOptions> = {}) {
  const clock = { now: 1_000_000 };
  const probed: ProbeTarget[] = [];
  const core = await TrackerCore.open({
    storage: new MemoryStorage(),
    model,
    leaseMs: LEASE_MS,
    probe: (t) => {
      probed.push(t);
      return Promise.resolve(pass);
    },
    clock: () => clock.now,
    ...o,
  });
  return { core, clock, probed };
}

const registration = (
  node: string,
  start: number,
  end: number,
  o: {
    urls?: string[];
    maxSessions?: number;
    kvCells?: number;
    memoryCapBytes?: bigint;
    artifactUrl?: string;
    engine?: string;
  } = {},
) =>
  create(RegisterRequestSchema, {
    token: "ignored by the core",
    node,
    urls: o.urls ?? [`http://${node}:1`],
    shard: {
      artifactSha256: hexToBytes(ARTIFACT),
      range: { start, end },
      engine: o.engine ?? "native-cpu",
      kvCells: o.kvCells ?? 1024,
      maxSessions: o.maxSessions ?? 4,
      decodeTokensPerS: 20,
      memoryCapBytes: o.memoryCapBytes ?? 0n,
      artifactUrl: o.artifactUrl ?? "",
    },
  });

const ask = (sessionId: string, count = 1, avoidNodes: string[] = []) =>
  create(RouteRequestSchema, { artifactSha256: hexToBytes(ARTIFACT), sessionId, count, avoidNodes });

const beat = (node: string, sessionIds: string[] = []) =>
  create(HeartbeatRequestSchema, { node, sessions: sessionIds.length, sessionIds });

/** The TrackerError a call raises, as "code: message". */
/** Registers each node at its placed range with the decode rate it measured; admits them all. */
async function measured(
  core: TrackerCore,
  nodes: ReadonlyArray<readonly [string, { start: number; end: number }, number]>,
): Promise<void> {
  for (const [node, r, tokensPerS] of nodes) {
    const req = registration(node, r.start, r.end);
    req.shard!.decodeTokensPerS = tokensPerS;
    core.register(req);
  }
  await core.admissionsSettled();
}

async function refusal(f: () => unknown): Promise<string> {
  try {
    await f();
  } catch (e) {
    if (e instanceof TrackerError) return `${e.code}: ${e.message}`;
    throw e;
  }
  return "accepted";
}

/** Registers nodes (name, start, end) and lets their probes finish. */
async function admitted(core: TrackerCore, nodes: Array<[string, number, number, number?]>) {
  for (const [name, start, end, maxSessions] of nodes) {
    core.register(registration(name, start, end, { maxSessions }));
  }
  await core.admissionsSettled();
}

describe("tracker core: registration", () => {
  it("refuses a registration missing its parts, for another artifact, past the model, or too big", async () => {
    const { core } = await tracker();
    expect(await refusal(() => core.register(create(RegisterRequestSchema, { node: "a" })))).toBe(
      "invalid_argument: a registration names the node, its URLs and its shard",
    );
    const other = registration("a", 0, 3);
    other.shard!.artifactSha256 = hexToBytes("cd".repeat(32));
    expect(await refusal(() => core.register(other))).toBe(
      "failed_precondition: this tracker routes artifact abababababab… only",
    );
    expect(await refusal(() => core.register(registration("a", 4, 9)))).toBe(
      "invalid_argument: layers 4:9 of 6",
    );
    expect(await refusal(() => core.register(registration("a", 3, 3)))).toBe(
      "invalid_argument: layers 3:3 of 6",
    );
    // a KV pool the engine's cap cannot hold
    expect(
      await refusal(() =>
        core.register(registration("a", 0, 6, { kvCells: 1 << 20, memoryCapBytes: 1n << 20n }))
      ),
    )
      .toMatch(
        /^resource_exhausted: layers 0:6 with 1048576 KV cells need .* more than the memory cap of 1\.0 MiB$/,
      );
    expect(core.nodes().nodes).toEqual([]);
  });

  it("hands out the lease and route key; the probe's verdict is booked and kept", async () => {
    const storage = new MemoryStorage();
    const refuse: ProbeVerdict = { ok: false, maxAbsDiff: 9, allowed: 1, detail: "max |Δ| 9 > 1" };
    const { core, probed } = await tracker({
      storage,
      probe: (t) => {
        probed.push(t);
        return Promise.resolve(t.node === "bad" ? refuse : pass);
      },
    });
    const r = core.register(registration("good", 0, 3));
    core.register(registration("bad", 3, 6));
    expect(r.leaseMs).toBe(BigInt(LEASE_MS));
    expect(r.routePublicKey).toEqual(core.routePublicKey);
    expect(core.nodes().nodes.map((n) => n.admission)).toEqual(["pending", "pending"]);
    await core.admissionsSettled();
    expect(probed.map((t) => [t.node, t.url, `${t.range.start}:${t.range.end}`])).toEqual([
      ["good", "http://good:1", "0:3"],
      ["bad", "http://bad:1", "3:6"],
    ]);
    expect(core.heartbeat(beat("good"))).toMatchObject({ known: true, admission: "admitted" });
    expect(core.heartbeat(beat("bad"))).toMatchObject({ known: true, admission: "refused: max |Δ| 9 > 1" });
    // a restarted tracker reads both back, with the same key; each node has one lease from
    // the restart to beat again (running routes and their repairs keep it meanwhile)
    const clock = { now: 5_000_000 };
    const again = await TrackerCore.open({
      storage,
      model,
      leaseMs: LEASE_MS,
      probe: () => Promise.resolve(pass),
      clock: () => clock.now,
    });
    expect(again.routePublicKey).toEqual(core.routePublicKey);
    expect(again.nodes().nodes.map((n) => [n.node, n.admission, n.live])).toEqual([
      ["bad", "refused: max |Δ| 9 > 1", true],
      ["good", "admitted", true],
    ]);
    clock.now += LEASE_MS + 1;
    expect(again.nodes().nodes.map((n) => n.live)).toEqual([false, false]);
  });

  it("keeps a rate the node's traffic measured when it differs much; the admission in flight still lands", async () => {
    const verdicts: Array<(v: ProbeVerdict) => void> = [];
    const { core } = await tracker({ probe: () => new Promise((r) => verdicts.push(r)) });
    const req = registration("a", 0, 6);
    req.shard!.decodeTokensPerS = 10;
    core.register(req);
    const rate = () => core.nodes().nodes[0].shard!.decodeTokensPerS;
    // within 15 %: the same rate as far as routes go (nothing is written)
    core.heartbeat(create(HeartbeatRequestSchema, { node: "a", decodeTokensPerS: 11 }));
    expect(rate()).toBe(10);
    core.heartbeat(create(HeartbeatRequestSchema, { node: "a", decodeTokensPerS: 30 }));
    expect(rate()).toBe(30);
    // nothing measured, or nonsense: kept as it was
    for (const r of [0, -5, Number.NaN, Infinity]) {
      core.heartbeat(create(HeartbeatRequestSchema, { node: "a", decodeTokensPerS: r }));
    }
    expect(rate()).toBe(30);
    // the probe began before the new rate: its verdict is about the same registration
    verdicts[0](pass);
    await core.admissionsSettled();
    expect(core.nodes().nodes[0].admission).toBe("admitted");
    expect(rate()).toBe(30);
  });

  it("drops a verdict on a registration that was replaced meanwhile; a thrown probe refuses", async () => {
    const verdicts: Array<(v: ProbeVerdict) => void> = [];
    const { core } = await tracker({ probe: () => new Promise((r) => verdicts.push(r)) });
    core.register(registration("a", 0, 6));
    core.register(registration("a", 0, 6, { urls: ["http://a:2"] }));
    verdicts[0]({ ...pass, ok: false, detail: "stale" });
    await Promise.resolve();
    expect(core.nodes().nodes[0].admission).toBe("pending");
    verdicts[1](pass);
    await core.admissionsSettled();
    expect(core.nodes().nodes[0].admission).toBe("admitted");

    const { core: c2 } = await tracker({ probe: () => Promise.reject(new Error("dial refused")) });
    c2.register(registration("a", 0, 6));
    await c2.admissionsSettled();
    expect(c2.nodes().nodes[0].admission).toBe("refused: probe failed: dial refused");
  });

  it("forgets a node that leaves, and says whether it knew it", async () => {
    const { core } = await tracker();
    await admitted(core, [["a", 0, 6]]);
    expect(core.leave(create(LeaveRequestSchema, { node: "a" })).known).toBe(true);
    expect(core.leave(create(LeaveRequestSchema, { node: "a" })).known).toBe(false);
    expect(core.heartbeat(beat("a"))).toMatchObject({ known: false, admission: "" });
    expect(core.nodes().nodes).toEqual([]);
  });

  it("refuses a wrong node token, in constant time", () => {
    expect(() => checkNodeToken("secret", "secret")).not.toThrow();
    for (const wrong of ["", "secreT", "secret!"]) {
      expect(() => checkNodeToken(wrong, "secret")).toThrow(
        new TrackerError("unauthenticated", "node token refused"),
      );
    }
  });
});

describe("tracker core: leases and routes", () => {
  it("routes only over admitted nodes whose lease is current", async () => {
    const { core, clock } = await tracker();
    await admitted(core, [["a", 0, 3], ["b", 3, 6]]);
    const r = await core.route(ask("s1"));
    expect(r.routes.map((x) => x.name)).toEqual(["a+b"]);
    // each hop names its node: the gateway watches those
    expect(r.routes[0].hops.map((h) => h.node)).toEqual(["a", "b"]);
    // b stops beating: past its lease it is not live and no route remains
    clock.now += LEASE_MS / 2;
    core.heartbeat(beat("a"));
    clock.now += LEASE_MS / 2 + 1;
    expect(core.nodes().nodes.map((n) => [n.node, n.live])).toEqual([["a", true], ["b", false]]);
    // asked about named nodes, the tracker answers for those it knows
    expect(core.nodes(["b", "gone"]).nodes.map((n) => [n.node, n.live])).toEqual([["b", false]]);
    expect(await refusal(() => core.route(ask("s2")))).toBe(
      "unavailable: no complete route of admitted, live nodes",
    );
    // a heartbeat brings it back
    core.heartbeat(beat("b"));
    expect((await core.route(ask("s3"))).routes[0].name).toBe("a+b");
    // avoided nodes are left out
    expect(await refusal(() => core.route(ask("s4", 1, ["b"])))).toMatch(/^unavailable/);
  });

  it("refuses an unknown artifact and a route without a session", async () => {
    const { core } = await tracker();
    const other = ask("s");
    other.artifactSha256 = hexToBytes("cd".repeat(32));
    expect(await refusal(() => core.route(other))).toBe("not_found: unknown model artifact");
    expect(await refusal(() => core.route(ask("")))).toBe(
      "invalid_argument: a route is asked for one session",
    );
    expect(await refusal(() => core.done(create(DoneRequestSchema)))).toBe(
      "invalid_argument: done names sessions, none of them empty",
    );
    expect(await refusal(() => core.done(create(DoneRequestSchema, { sessionId: "s", sessionIds: [""] }))))
      .toBe("invalid_argument: done names sessions, none of them empty");
    const many = Array.from({ length: MAX_DONE_SESSIONS }, (_, i) => `s${i}`);
    expect(await refusal(() => core.done(create(DoneRequestSchema, { sessionId: "s", sessionIds: many }))))
      .toBe(`invalid_argument: done names 4097 sessions; at most ${MAX_DONE_SESSIONS} in one call`);
  });

  it("gives the least loaded disjoint route first, then busy, then free again when done", async () => {
    const { core } = await tracker();
    await admitted(core, [["a0", 0, 3, 2], ["a1", 3, 6, 2], ["b0", 0, 3, 2], ["b1", 3, 6, 2]]);
    const first = (await core.route(ask("s1"))).routes.map((r) => r.name);
    expect(first).toHaveLength(1);
    // the other route now carries less: it comes first, both when asked for two
    const both = (await core.route(ask("s2", 2))).routes.map((r) => r.name);
    expect(both).toHaveLength(2);
    expect(both[0]).not.toBe(first[0]);
    expect(new Set(both)).toEqual(new Set(["a0+a1", "b0+b1"]));
    // s1 holds one slot on its route, s2 one on each: the next takes the last slot
    const third = (await core.route(ask("s3"))).routes[0].name;
    expect(third).toBe(first[0] === "a0+a1" ? "b0+b1" : "a0+a1");
    expect(await refusal(() => core.route(ask("s4")))).toBe("resource_exhausted: all routes are busy");
    // the gateway's word frees a session's claims on every node of its routes
    expect(core.done(create(DoneRequestSchema, { sessionId: "s2" })).released).toBe(4);
    expect((await core.route(ask("s4"))).routes).toHaveLength(1);
    // one call may end several sessions: s1, s3 and s4 held 2 claims each (s2 already went)
    expect(core.done(create(DoneRequestSchema, { sessionId: "s1", sessionIds: ["s2", "s3", "s4"] })).released)
      .toBe(6);
    expect((await core.route(ask("s5", 2))).routes).toHaveLength(2);
  });

  it("keeps a reserve of slots for repairs; a repair keeps the nodes that still hold its session", async () => {
    const { core } = await tracker({ repairReserve: 1 });
    await admitted(core, [["a0", 0, 3, 1], ["b0", 0, 3, 1], ["a1", 3, 6, 1], ["b1", 3, 6, 1], [
      "c1",
      3,
      6,
      1,
    ]]);
    // layers 0:3 have two slots: one new session takes one, the other is kept for repairs
    const s1 = (await core.route(ask("s1"))).routes[0].hops.map((h) => h.node);
    expect(await refusal(() => core.route(ask("s2")))).toBe("resource_exhausted: all routes are busy");
    // s1 loses its node for 3:6: the repair keeps its first node (full, but it holds s1) and
    // replaces only the lost one
    const repaired = await core.route(
      create(RouteRequestSchema, {
        artifactSha256: hexToBytes(ARTIFACT),
        sessionId: "s1",
        count: 1,
        avoidNodes: [s1[1]],
        keepNodes: [s1[0]],
      }),
    );
    const hops = repaired.routes[0].hops.map((h) => h.node);
    expect(hops[0]).toBe(s1[0]);
    expect(hops[1]).not.toBe(s1[1]);
    // a repair of another session takes the reserve a new session could not
    const other = (await core.route(ask("s3", 1, [s1[1]]))).routes[0].hops.map((h) => h.node);
    expect(other[0]).toBe(s1[0] === "a0" ? "b0" : "a0");
  });

  it("prefers the route through the nodes that hold a prompt's prefix while it has room, pooled or not", async () => {
    for (const poolMinNodes of [1_000, 0]) {
      const { core } = await tracker({ poolMinNodes });
      await admitted(core, [["a0", 0, 3, 2], ["a1", 3, 6, 2], ["b0", 0, 3, 2], ["b1", 3, 6, 2]]);
      const prefer = (sessionId: string, preferNodes: string[]) =>
        core.route(create(RouteRequestSchema, { ...ask(sessionId), preferNodes }));
      // b0+b1 holds the prefix: it comes first though a0+a1 is as free, and again while it has room
      expect((await prefer("s1", ["b0", "b1"])).routes[0].name).toBe("b0+b1");
      expect((await prefer("s2", ["b1"])).routes[0].name).toBe("b0+b1");
      // full now: load decides
      expect((await prefer("s3", ["b0", "b1"])).routes[0].name).toBe("a0+a1");
    }
  });

  it("counts sessions from claims and heartbeats once each, and routes assigned", async () => {
    const { core } = await tracker();
    await admitted(core, [["a", 0, 6]]);
    await core.route(ask("s1"));
    core.heartbeat(beat("a", ["s1", "s2"]));
    const [a] = core.nodes().nodes;
    expect([a.sessions, a.load, a.routesAssigned]).toEqual([2, 2, 1n]);
  });

  it("signs a ticket per hop that the route key verifies, with growing epochs", async () => {
    const { core, clock } = await tracker();
    await admitted(core, [["a", 0, 2], ["b", 2, 6]]);
    const key = await importPublicRouteKey(core.routePublicKey);
    const [r1] = (await core.route(ask("s1"))).routes;
    const [r2] = (await core.route(ask("s2"))).routes;
    expect(r2.epoch).toBeGreaterThan(r1.epoch);
    expect(r1.maxSessionCells).toBe(1024);
    for (const h of r1.hops) {
      const claims = await verifyTicket(key, h.routeTicket, {
        sessionId: "s1",
        routeEpoch: r1.epoch,
        artifactSha256: hexToBytes(ARTIFACT),
        range: h.range!,
      }, clock.now);
      expect(claims.issuer).toBe("tracker");
    }
  });
});

describe("tracker core: hop URLs and seam compression", () => {
  const tab = "relay+ws://relay:9/tab";

  it("gives the hop after a relay-only node its relay URL", () => {
    expect(hopUrls([["http://a:1"], [tab], ["http://c:1", "relay+ws://relay:9/c"], ["http://d:1"]])).toEqual([
      "http://a:1",
      tab,
      "relay+ws://relay:9/c",
      "http://d:1",
    ]);
    // a node without a relay URL keeps its own
    expect(hopUrls([[tab], ["http://b:1"]])).toEqual([tab, "http://b:1"]);
  });

  it("compresses seams by policy: auto only where a hop goes through the relay", () => {
    expect(routeCompression("none", [tab])).toBe(Compression.NONE);
    expect(routeCompression("q8", ["http://a:1"])).toBe(Compression.Q8_BLOCK32);
    expect(routeCompression("auto", ["http://a:1", tab])).toBe(Compression.Q8_BLOCK32);
    expect(routeCompression("auto", ["http://a:1", "http://b:1"])).toBe(Compression.NONE);
  });

  it("routes through a tab with relay URLs and q8 seams under auto", async () => {
    const { core } = await tracker({ seamCompression: "auto" });
    core.register(registration("a", 0, 2));
    core.register(registration("tab", 2, 4, { urls: [tab] }));
    core.register(registration("c", 4, 6, { urls: ["http://c:1", "relay+ws://relay:9/c"] }));
    await core.admissionsSettled();
    const [r] = (await core.route(ask("s"))).routes;
    expect(r.hops.map((h) => h.url)).toEqual(["http://a:1", tab, "relay+ws://relay:9/c"]);
    expect(r.seamCompression).toBe(Compression.Q8_BLOCK32);
  });

  it("lets CPU routes cut prompts for side-by-side prefill, and routes with a GPU keep whole chunks", async () => {
    const { core } = await tracker();
    core.register(registration("a", 0, 3));
    core.register(registration("a2", 0, 3));
    core.register(registration("b", 3, 6));
    core.register(registration("g", 3, 6, { engine: "native-cuda" }));
    await core.admissionsSettled();
    const routes = (await core.route(ask("s", 2))).routes;
    const floorOf = (last: string) => routes.find((r) => r.hops[1].node === last)?.pipelineChunkFloor;
    expect(floorOf("b")).toBe(PIPELINE_MIN_CHUNK);
    expect(floorOf("g")).toBe(0);
  });
});

describe("tracker core: a volunteer's assignment", () => {
  const split = [layerRange(0, 2), layerRange(2, 4), layerRange(4, 6)];
  const vmodel = { manifest, kv: shape.layers, name: "tiny" };
  const base = "http://gw:1/artifacts/" + ARTIFACT;
  const state = (node: string, start: number, end: number, live: boolean, artifactUrl = "") =>
    ({
      node,
      live,
      shard: { artifactSha256: hexToBytes(ARTIFACT), range: { start, end }, artifactUrl },
    }) as NodeState;

  it("offers the range the fewest live nodes host, and live peers as sources", () => {
    const nodes = [
      state("a", 0, 2, true, "http://a:1/artifacts"),
      state("b", 2, 4, false, "http://b:1/artifacts"),
      state("c", 4, 6, true),
    ];
    const a = volunteerAssignment(vmodel, {
      candidates: split,
      capBytes: 4 * 2 ** 30,
      nodes,
      artifactUrl: base,
    });
    expect(a).toMatchObject({
      model: "tiny",
      artifact: ARTIFACT,
      nLayer: 6,
      range: { start: 2, end: 4 },
      hostsAlready: 0,
      fileBytes: file.length,
      memoryCapBytes: 4 * 2 ** 30,
      ...TAB_ENGINE,
      manifestUrl: `${base}/manifest`,
      sources: [{ url: base }, { url: "http://a:1/artifacts", layers: { start: 0, end: 2 } }],
    });
    // K and V in f16 for every layer and cell of a tab's pool
    expect(a.memory.kvBytes).toBe(2 * 2 * TAB_ENGINE.kvCells * shape.layers[0].k * 2);
    expect(a.downloadBytes).toBeGreaterThan(0);
    expect(a.downloadBytes).toBeLessThan(file.length);
  });

  it("takes the range asked for, refuses a malformed one, and one no engine of that cap holds", () => {
    expect(offeredRanges(split, undefined, 6)).toBe(split);
    expect(offeredRanges(split, "1:5", 6)).toEqual([{ start: 1, end: 5 }]);
    expect(() => offeredRanges(split, "5:9", 6)).toThrow(
      new TrackerError("invalid_argument", "layers=5:9: layer range 5:9 ends past the model's 6 layers"),
    );
    let err: unknown;
    try {
      volunteerAssignment(vmodel, { candidates: split, capBytes: 1024, nodes: [], artifactUrl: base });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TrackerError);
    expect((err as TrackerError).code).toBe("resource_exhausted");
    expect((err as TrackerError).message).toMatch(
      /^no range fits this engine: layers 0:2 need .* more than the memory cap of/,
    );
  });
});

describe("kv shape", () => {
  it("narrows K and V rows by head_count_kv / head_count", () => {
    // the synthetic model: n_embd 64, 4 heads, 2 KV heads
    expect(shape.nEmbd).toBe(64);
    expect(shape.nLayer).toBe(6);
    expect(shape.layers).toEqual(new Array(6).fill({ k: 32, v: 32, window: 0 }));
  });
});

describe("tracker core: placement", () => {
  const BUDGET = {
    kvCells: 256,
    maxSessions: 1,
    batchTokens: 16,
    batchInvariant: true,
    flashAttention: true,
  };
  const need = (start: number, end: number) =>
    shardMemory(model, { start, end }, BUDGET.kvCells, { ...BUDGET, maxSequences: 1 }).total;
  // room for half the model wherever the half is, not for the whole
  const cap = BigInt(Math.max(need(0, 3), need(3, 6)) + 1);
  const placeAsk = (node: string, memoryCapBytes = cap) =>
    create(PlaceRequestSchema, {
      node,
      artifactSha256: hexToBytes(ARTIFACT),
      memoryCapBytes,
      engine: "native-cpu",
      ...BUDGET,
    });
  const span = (r?: { start: number; end: number }) => (r ? `${r.start}:${r.end}` : "-");

  it("places asking nodes so every layer is covered within their caps; tells them when the plan moves", async () => {
    const { core, clock } = await tracker();
    expect(need(0, 6)).toBeGreaterThan(Number(cap));
    const a = (await core.place(placeAsk("a"))).range!;
    // alone it cannot hold the model: it gets what it can, from layer 0
    expect(span(a)).toBe("0:3");
    const b = (await core.place(placeAsk("b"))).range!;
    expect(span(b)).toBe("3:6");
    await admitted(core, [["a", a.start, a.end], ["b", b.start, b.end]]);
    expect((await core.route(ask("s1"))).routes[0].name).toBe("a+b");
    // a third node makes no second route alone: it doubles a range, and nobody moves
    const c = (await core.place(placeAsk("c"))).range!;
    expect([span(a), span(b)]).toContain(span(c));
    expect(core.heartbeat(beat("a")).place).toBeUndefined();
    // the node whose range c does not double stops beating; past its lease c is told to
    // fill the hole it leaves, at its next heartbeat, and the other node stays
    await admitted(core, [["c", c.start, c.end]]);
    const [stays, goes] = span(c) === span(a) ? ["a", "b"] : ["b", "a"];
    const hole = span(goes === "a" ? a : b);
    clock.now += LEASE_MS / 2;
    core.heartbeat(beat(stays));
    core.heartbeat(beat("c"));
    clock.now += LEASE_MS / 2 + 1;
    core.heartbeat(beat(stays));
    expect(span(core.heartbeat(beat("c")).place)).toBe(hole);
    expect(core.heartbeat(beat(stays)).place).toBeUndefined();
    expect(span(core.placement().get("c"))).toBe(hole);
  });

  it("with plans worked out in slices between calls, asks are answered as the plan lands, the same", async () => {
    const answers = async (core: TrackerCore) => {
      const a = span((await core.place(placeAsk("a"))).range);
      // asks at once: one plan places them
      const rest = await Promise.all(["b", "c", "d"].map((n) => core.place(placeAsk(n))));
      return [a, ...rest.map((r) => span(r.range))];
    };
    const sliced = await answers((await tracker({ giveWay: (resume) => setTimeout(resume, 0) })).core);
    expect(sliced[0]).toBe("0:3");
    expect(sliced).toEqual(await answers((await tracker()).core));
  });

  it("never places a range where the model cannot be cut (glm-dsa: only at full indexer layers)", async () => {
    // 8 layers, full indexers at 0, 3 and 6: the even halves 0:4 and 4:8 are not allowed
    const dsaFile = synthModel({ arch: "glm-dsa", nLayer: 8 });
    const dsaHeader = parseGgufHeader(dsaFile);
    const dsaManifest = buildManifest(dsaHeader, dsaFile.length, ARTIFACT);
    const dsa = { artifact: ARTIFACT, nLayer: 8, manifest: dsaManifest, kv: kvShape(dsaHeader).layers };
    const { core } = await tracker({ model: dsa });
    const needed = (start: number, end: number) =>
      shardMemory(dsa, { start, end }, BUDGET.kvCells, { ...BUDGET, maxSequences: 1 }).total;
    // room for four layers anywhere: without the rule two nodes would take 0:4 and 4:8
    const room = BigInt(Math.max(needed(0, 4), needed(4, 8)) + 1);
    expect(needed(0, 8)).toBeGreaterThan(Number(room));
    const spans: Array<{ start: number; end: number } | undefined> = [];
    for (const n of ["a", "b", "c"]) spans.push((await core.place(placeAsk(n, room))).range);
    expect(spans.map((r) => (r ? `${r.start}:${r.end}` : "-")).sort()).toEqual(["0:3", "3:6", "6:8"]);
    // together they cover the model
    const covered = new Set(
      spans.flatMap((r) => (r ? Array.from({ length: r.end - r.start }, (_, i) => r.start + i) : [])),
    );
    expect(covered.size).toBe(8);
  });

  it("once every speed is measured and the plan has been quiet, moves layers to the faster node", async () => {
    const { core, clock } = await tracker({ leaseMs: 60_000 });
    // a holds half the model at most; b holds five layers, but a came first
    const a = (await core.place(placeAsk("a"))).range!;
    const b = (await core.place(placeAsk("b", BigInt(need(0, 5) + 1)))).range!;
    expect([span(a), span(b)]).toEqual(["0:3", "3:6"]);
    // a measures 10 tok/s on its 3 layers (30 layers/s), b 100 (300 layers/s)
    const registered = (node: string, r: { start: number; end: number }, tokensPerS: number) => {
      const req = registration(node, r.start, r.end);
      req.shard!.decodeTokensPerS = tokensPerS;
      core.register(req);
    };
    registered("a", a, 10);
    registered("b", b, 100);
    await core.admissionsSettled();
    // not before the plan has been quiet a while
    expect(core.heartbeat(beat("a")).place).toBeUndefined();
    clock.now += 30_001;
    core.heartbeat(beat("b"));
    const movedA = core.heartbeat(beat("a")).place;
    const movedB = core.heartbeat(beat("b")).place;
    // the slow node's share shrinks: the slowest stage is faster than before
    const len = (r?: { start: number; end: number }) => (r ? r.end - r.start : 0);
    expect(len(movedA)).toBeLessThan(3);
    expect(len(movedB)).toBeGreaterThan(3);
    expect(gaps(6, [movedA!, movedB!])).toEqual([]);
  });

  it("a rebalance waits while sessions run when a node would leave layers nobody else holds", async () => {
    const { core, clock } = await tracker({ leaseMs: 60_000 });
    const a = (await core.place(placeAsk("a"))).range!;
    const b = (await core.place(placeAsk("b", BigInt(need(0, 5) + 1)))).range!;
    await measured(core, [["a", a, 10], ["b", b, 100]]);
    // a session on the only route: the faster plan is made, but nobody is told to move
    expect((await core.route(ask("s1"))).routes[0].name).toBe("a+b");
    clock.now += 30_001;
    core.heartbeat(beat("b", ["s1"]));
    expect(core.heartbeat(beat("a", ["s1"])).place).toBeUndefined();
    expect(core.heartbeat(beat("b", ["s1"])).place).toBeUndefined();
    expect(span(core.placement().get("a"))).not.toBe(span(a));
    // the session ends: the network is quiet, and the moves go out
    core.done(create(DoneRequestSchema, { sessionId: "s1" }));
    clock.now += 1_001;
    const movedA = core.heartbeat(beat("a")).place;
    const movedB = core.heartbeat(beat("b")).place;
    expect(gaps(6, [movedA!, movedB!])).toEqual([]);
    expect(span(movedA)).toBe(span(core.placement().get("a")));
  });

  it("a rebalance leaves a node with sessions of its own where it is until they end; one without moves", async () => {
    const { core, clock } = await tracker({ leaseMs: 60_000 });
    // a holds 0:3; b (room for five layers) and c double 3:6
    const a = (await core.place(placeAsk("a"))).range!;
    const b = (await core.place(placeAsk("b", BigInt(need(0, 5) + 1)))).range!;
    const c = (await core.place(placeAsk("c"))).range!;
    expect([span(a), span(b), span(c)]).toEqual(["0:3", "3:6", "3:6"]);
    await measured(core, [["a", a, 10], ["b", b, 100], ["c", c, 10]]);
    // a session on a+b; c serves none
    expect((await core.route(ask("s1"))).routes[0].name).toBe("a+b");
    clock.now += 30_001;
    const beatOf = (n: string) => core.heartbeat(beat(n, n === "c" ? [] : ["s1"]));
    const told = Object.fromEntries(["a", "b", "c"].map((n) => [n, beatOf(n).place]));
    // the faster plan moves all three; only c, with no session and no layer alone, goes now
    for (const n of ["a", "b", "c"]) expect(span(core.placement().get(n)), n).not.toBe(span({ a, b, c }[n]));
    expect(told.a).toBeUndefined();
    expect(told.b).toBeUndefined();
    expect(span(told.c)).toBe(span(core.placement().get("c")));
    // no new route goes through c while it leaves: without b, none at all
    expect(await refusal(() => core.route(ask("s2", 1, ["b"])))).toMatch(/^unavailable/);
    // the session ends: a and b go too
    core.done(create(DoneRequestSchema, { sessionId: "s1" }));
    clock.now += 1_001;
    expect(span(core.heartbeat(beat("a")).place)).toBe(span(core.placement().get("a")));
    expect(span(core.heartbeat(beat("b")).place)).toBe(span(core.placement().get("b")));
  });

  it("with replicas, one leads: a follower answers an ask with the leader's plan, the same everywhere", async () => {
    // what the database carries between them, moved by hand: asks to everyone, the plan out
    const asks: Array<{ req: ReturnType<typeof placeAsk>; at: number }> = [];
    const plans: PlanEntry[][] = [];
    const shared = () =>
      Object.assign(new MemoryStorage(), {
        saveAsk: (req: ReturnType<typeof placeAsk>, at: number) => void asks.push({ req, at }),
        savePlan: (entries: readonly PlanEntry[]) => void plans.push([...entries]),
      });
    const leader = await tracker({ storage: shared() });
    const follower = await tracker({ storage: shared() });
    follower.core.leadPlacement(false);
    // one replica's sync after another's: the leader places what it heard in its next batch
    const sync = async () => {
      const heard = asks.splice(0);
      const changes = { records: [], gone: [], beats: [] };
      leader.core.absorb({ ...changes, asks: heard });
      await new Promise((r) => setTimeout(r, PLAN_BATCH_MS + 50));
      follower.core.absorb({ ...changes, asks: heard, plan: plans.splice(0).flat() });
    };
    const a = (await leader.core.place(placeAsk("a"))).range!;
    // the follower's answer waits for the leader's plan to have seen the ask
    let b: { start: number; end: number } | undefined;
    const asking = follower.core.place(placeAsk("b")).then((r) => (b = r.range));
    await Promise.resolve();
    expect(b).toBeUndefined();
    await sync();
    await asking;
    expect([span(a), span(b)]).toEqual(["0:3", "3:6"]);
    expect(span(leader.core.placement().get("b"))).toBe("3:6");
    expect(span(follower.core.placement().get("a"))).toBe("0:3");
    // an ask nothing fits is refused by the follower once the leader said so, and forgotten
    const tiny = follower.core.place(placeAsk("tiny", 1000n));
    await sync();
    expect(await refusal(() => tiny)).toMatch(/^resource_exhausted: no range/);
    expect(leader.core.placement().has("tiny")).toBe(false);
    // the follower takes the lead (the leader died): it places from the plan in force
    follower.core.leadPlacement(true);
    const c = (await follower.core.place(placeAsk("c"))).range!;
    expect(span(c)).not.toBe("-");
    expect(span(follower.core.placement().get("a"))).toBe("0:3");
  });

  it("refuses a node no range fits, and one for another artifact", async () => {
    const { core } = await tracker();
    expect(await refusal(() => core.place(placeAsk("tiny", 1000n)))).toMatch(/^resource_exhausted: no range/);
    expect(
      await refusal(() =>
        core.place(create(PlaceRequestSchema, { ...placeAsk("x"), artifactSha256: new Uint8Array(32) }))
      ),
    ).toMatch(/^failed_precondition/);
  });
});

describe("tracker replicas", () => {
  it("take epochs from one counter in blocks: unique, increasing, above the session's last", async () => {
    // the database's counter: each reservation moves it past the block (and past `after`)
    let counter = 5_000n;
    let reservations = 0;
    const reserve = (n: number, after: bigint) => {
      reservations++;
      if (counter <= after) counter = after + 1n;
      const first = counter;
      counter += BigInt(n);
      return Promise.resolve(first);
    };
    const a = new BlockEpochs(reserve, 4), b = new BlockEpochs(reserve, 4);
    const fromA = [...await a.take(3, 0n), ...await a.take(1, 0n)];
    const fromB = await b.take(2, 0n);
    expect(fromA).toEqual([5000n, 5001n, 5002n, 5003n]);
    // A's block ran low as it handed out its last epoch, so A reserved its next block then, in
    // the background: B's block comes after both
    expect(reservations).toBe(3);
    expect(fromB).toEqual([5009n, 5010n]);
    // A's next routes take the block reserved ahead, with no reservation of their own
    expect(await a.take(2, 0n)).toEqual([5005n, 5006n]);
    expect(reservations).toBe(3);
    // A's block is spent; a session B routed is repaired through A: above B's epoch
    const [repair] = await a.take(1, fromB[1]);
    expect(repair).toBeGreaterThan(fromB[1]);
    // and through B again, above A's: never back
    const [again] = await b.take(1, repair);
    expect(again).toBeGreaterThan(repair);
    // concurrent routes share one reservation
    const before = reservations;
    const both = await Promise.all([a.take(1, 0n), a.take(1, 0n)]);
    expect(new Set(both.flat()).size).toBe(2);
    expect(reservations - before).toBeLessThanOrEqual(1);
    // one tracker alone: from its start time, above a session's last all the same
    expect(new ClockEpochs(7).take(2, 0n)).toEqual([7001n, 7002n]);
    expect(new ClockEpochs(7).take(1, 9_000n)).toEqual([9001n]);
  });

  it("route through nodes another replica registered, once its records and beats come in", async () => {
    const storage = new MemoryStorage();
    const { core: a, clock } = await tracker({ storage });
    const { core: b } = await tracker();
    await admitted(a, [["a", 0, 3], ["b", 3, 6]]);
    expect(await refusal(() => b.route(ask("s1")))).toBe(
      "unavailable: no complete route of admitted, live nodes",
    );
    // the registrations with their verdicts: known, but not live before a heartbeat
    b.absorb({ records: storage.nodes(), gone: [], beats: [] });
    expect(b.nodes().nodes.map((n) => [n.node, n.admission])).toEqual([["a", "admitted"], ["b", "admitted"]]);
    const beats: Beat[] = [
      { node: "a", at: clock.now, sessions: 1, sessionIds: ["elsewhere"] },
      { node: "b", at: clock.now, sessions: 0, sessionIds: [] },
    ];
    b.absorb({ records: [], gone: [], beats });
    const r = await b.route(ask("s1"));
    expect(r.routes[0].name).toBe("a+b");
    // the session the other replica's route opened on "a" counts here too
    expect(b.nodes(["a"]).nodes[0].load).toBe(2);
    // an older beat coming in again changes nothing
    b.absorb({ records: [], gone: [], beats: [{ ...beats[0], at: clock.now - 1, sessionIds: [] }] });
    expect(b.nodes(["a"]).nodes[0].load).toBe(2);
    // a node the other replica saw leave leaves every route here
    b.absorb({ records: [], gone: ["b"], beats: [] });
    expect(await refusal(() => b.route(ask("s2")))).toBe(
      "unavailable: no complete route of admitted, live nodes",
    );
  });
});

/** Memory storage that also keeps the heartbeats a replica shares, as PostgreSQL does. */
class SharedStorage extends MemoryStorage {
  readonly beats: Beat[] = [];
  saveBeat(b: Beat): void {
    this.beats.push(b);
  }
}

describe("tracker core: replicas that stop", () => {
  it("shares a registration's lease at once: another replica sees the node live before its first beat", async () => {
    const storage = new SharedStorage();
    const { core: a } = await tracker({ storage });
    const { core: b } = await tracker();
    await admitted(a, [["n", 0, 6]]);
    b.absorb({ records: storage.nodes(), gone: [], beats: storage.beats });
    expect(b.nodes(["n"]).nodes[0].live).toBe(true);
    expect((await b.route(ask("s1"))).routes[0].name).toBe("n");
  });

  it("probes a node again, once, when it comes still pending from a replica that stopped before its verdict", async () => {
    const storage = new SharedStorage();
    // replica a takes the registration and stops while probing: its verdict is never saved
    const { core: a } = await tracker({ storage, probe: () => new Promise(() => {}) });
    a.register(registration("n", 0, 6));
    const { core: b, probed } = await tracker();
    b.absorb({ records: storage.nodes(), gone: [], beats: storage.beats });
    expect(b.nodes(["n"]).nodes[0].admission).toBe("pending");
    // the node moves to b; its beats start one probe there
    expect(b.heartbeat(beat("n")).known).toBe(true);
    b.heartbeat(beat("n"));
    await b.admissionsSettled();
    expect(probed.map((t) => t.node)).toEqual(["n"]);
    expect(b.nodes(["n"]).nodes[0].admission).toBe("admitted");
    // an admitted node's beats probe nothing
    b.heartbeat(beat("n"));
    await b.admissionsSettled();
    expect(probed).toHaveLength(1);
  });
});

describe("tracker core: the route pool (large networks)", () => {
  it("spreads new sessions over every disjoint route, drops routes through gone nodes, says busy when all are full", async () => {
    const { core, clock } = await tracker({ poolMinNodes: 0 });
    // three disjoint routes of two nodes
    await admitted(core, [
      ["a1", 0, 3, 1],
      ["a2", 3, 6, 1],
      ["b1", 0, 3, 1],
      ["b2", 3, 6, 1],
      ["c1", 0, 2, 1],
      [
        "c2",
        2,
        6,
        1,
      ],
    ]);
    const names: string[] = [];
    for (let i = 0; i < 3; i++) names.push((await core.route(ask(`s${i}`))).routes[0].name);
    // one session each: every route taken once
    expect([...names].sort()).toEqual(["a1+a2", "b1+b2", "c1+c2"]);
    expect(await refusal(() => core.route(ask("s3")))).toBe("resource_exhausted: all routes are busy");
    // full: the route a session's end frees is the one found, and it is full again after
    core.done(create(DoneRequestSchema, { sessionId: "s1" }));
    expect((await core.route(ask("s1b"))).routes[0].name).toBe(names[1]);
    expect(await refusal(() => core.route(ask("s3")))).toBe("resource_exhausted: all routes are busy");
    // ... and so is one its nodes' heartbeats show closed (they reported it open before)
    for (const node of names[0].split("+")) {
      core.heartbeat(beat(node, ["s0"]));
      core.heartbeat(beat(node, []));
      if (node === names[0].split("+")[0]) {
        expect(await refusal(() => core.route(ask("s3")))).toBe("resource_exhausted: all routes are busy");
      }
    }
    expect((await core.route(ask("s0b"))).routes[0].name).toBe(names[0]);
    core.done(create(DoneRequestSchema, { sessionId: "s0b" }));
    core.done(create(DoneRequestSchema, { sessionId: "s1b" }));
    // a session ends; a node leaves: its route goes (the pool is worked out again)
    for (const sessionId of ["s0", "s1", "s2"]) core.done(create(DoneRequestSchema, { sessionId }));
    core.leave(create(LeaveRequestSchema, { node: "a2" }));
    clock.now += 1_000;
    const after = new Set<string>();
    for (let i = 0; i < 2; i++) after.add((await core.route(ask(`t${i}`))).routes[0].name);
    // two routes remain, one through either first node left over
    expect(after.size).toBe(2);
    expect([...after].some((n) => n.includes("a2"))).toBe(false);
    expect(await refusal(() => core.route(ask("t2")))).toBe("resource_exhausted: all routes are busy");
    // a gateway names c2 gone (a repair's avoid list): no new session is routed through it
    // until it beats again
    for (const sessionId of ["t0", "t1"]) core.done(create(DoneRequestSchema, { sessionId }));
    // (the session asked for again around c2 is routed from the pool, around it)
    expect((await core.route(ask("r", 1, ["c2"]))).routes[0].name).toMatch(/^[ab]1\+b2$/);
    core.done(create(DoneRequestSchema, { sessionId: "r" }));
    expect((await core.route(ask("v0"))).routes[0].name).not.toContain("c2");
    expect(await refusal(() => core.route(ask("v1")))).toBe("resource_exhausted: all routes are busy");
    core.done(create(DoneRequestSchema, { sessionId: "v0" }));
    clock.now += 1;
    core.heartbeat(beat("c2"));
    const back = new Set<string>();
    for (let i = 0; i < 2; i++) back.add((await core.route(ask(`w${i}`))).routes[0].name);
    expect([...back].some((n) => n.includes("c2"))).toBe(true);
    // past their lease without a beat: no route at all
    clock.now += LEASE_MS + 1;
    expect(await refusal(() => core.route(ask("u")))).toBe(
      "unavailable: no complete route of admitted, live nodes",
    );
  });
});
