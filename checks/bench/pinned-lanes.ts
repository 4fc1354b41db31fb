// The contract's lanes (checks/bench/contract.json): every engine process held to one core, a
// core standing in for a machine. One session on each lane in turns, round after round; 8
// sessions on a route of 2 against two whole-model processes at 4 each, in turns; the loopback
// floor between the two cores; what a node spends beside its engine, and holds beside its
// engine's buffers. The bench process (the driver, as a gateway would be) runs on cpu1.
import { formatRange, type LayerRange } from "../../src/engine/layer-range.ts";
import { buildManifest } from "../../src/gguf/manifest.ts";
import { decodeWork } from "../../src/tracker/placement/decode-work.ts";
import { plan } from "../../src/tracker/placement/placement.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { ensureRpcTools } from "../../server/build/rpc.ts";
import { freePort } from "../../server/http/free-port.ts";
import type { GgufHeader } from "../../src/gguf/reader.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import type { EngineProcess } from "../engine-host/engine-process.ts";
import { type LocalRoute, startLocalRoute } from "../hosts/local-route.ts";
import { decodeTps } from "./figures.ts";
import { spawnWhole, wholeSession } from "./measure-engine.ts";
import { crossingMsOf, engineMsOf, routeSession } from "./measure-route.ts";
import { rpcServerArgs, startRpcDriver, waitListening } from "./measure-rpc.ts";
import { coresOf, cpuMs, peakRss, pin } from "./pin.ts";
import {
  decodeRun,
  prefilled,
  prompt,
  quantile,
  spawnBatchedWhole,
  stepTogether,
} from "./route-throughput.ts";
import { hiddenStepFrame } from "./step-frame.ts";
import { encodeFrame } from "../../src/seam/frame.ts";
import { IDLE_GAP_MS, startEcho, tcpRoundTrip, timed } from "./transport.ts";

export interface PinnedOptions {
  readonly modelPath: string;
  readonly header: GgufHeader;
  readonly fileSize: number;
  readonly nLayer: number;
  readonly nEmbd: number;
  readonly backend: NativeBackend;
  readonly split2: readonly LayerRange[];
  readonly split3: readonly LayerRange[];
  readonly promptTokens: number;
  readonly decodeTokens: number;
  /** rounds of one session in turns (the contract asks at least 7) */
  readonly rounds: number;
  /** rounds of 8 sessions in turns */
  readonly manyRounds: number;
  readonly progress?: (what: string) => void;
}

/** One lane's one session: its decode tok/s and greedy tokens; a route's step profile too. */
interface LaneRun {
  readonly tps: number;
  readonly tokens: number[];
  /** routes: p50 over steps of the nodes' engine ms, and of the rest divided by crossings */
  readonly engineMs?: number;
  readonly crossingMs?: number;
  readonly stepMs?: number;
}

const LANES = ["W1", "R2", "R3", "RPC2", "R2_one_core", "R2_cores_idle"] as const;
type LaneName = typeof LANES[number];

/**
 * The split the tracker's placement picks for two nodes alike that cannot each hold the whole
 * model (else it makes two routes of one): ranges of even work, the last paying for the head.
 */
export function placedSplit(header: GgufHeader, fileSize: number, nLayer: number): LayerRange[] {
  const manifest = buildManifest(header, fileSize, "0".repeat(64));
  const placed = plan(
    { nLayer, fits: (_, s) => s.end - s.start < nLayer, work: decodeWork(manifest) },
    [{ node: "a", speed: 1 }, { node: "b", speed: 1 }],
  );
  return [...placed.values()].flatMap((s) => s ? [s as LayerRange] : []).sort((x, y) => x.start - y.start);
}

export async function pinnedLanes(o: PinnedOptions) {
  const say = o.progress ?? (() => {});
  const cores = await coresOf(Deno.pid);
  await pin(Deno.pid, 1);
  const closers: (() => Promise<void>)[] = [];
  try {
    say("pinned: the loopback floor between the two cores");
    const floor = await loopbackFloor(o.nEmbd);

    say("pinned: W1, R2, R3, RPC2 and the route of 2 on one core");
    const whole = await spawnWhole({ modelPath: o.modelPath, backend: o.backend, threads: 1 });
    closers.push(() => whole.close());
    await pin(whole.pid, 0);
    const route = (split: readonly LayerRange[], cpus: number[], nodeArgs?: string[]) =>
      startPinnedRoute(o, split, cpus, closers, nodeArgs);
    const r2 = await route(o.split2, [0, 1]);
    // the nodes' cores left to idle between steps (no keep-awake spinner): what waking them costs
    const r2Idle = await route(o.split2, [0, 1], ["--keep-awake", "0"]);
    const r3 = await route(o.split3, [0, 1, 0]);
    const rpc = await startPinnedRpc(o, closers);

    const p = prompt(o.promptTokens, 0);
    const onRoute = (local: LocalRoute) => async (): Promise<LaneRun> => {
      const { first, replies } = await routeSession(
        local,
        `pinned-${crypto.randomUUID()}`,
        p,
        o.decodeTokens,
      );
      return {
        tps: decodeTps(replies.map((x) => x.ms)),
        tokens: [first.token, ...replies.map((x) => x.token)],
        engineMs: quantile(replies.map(engineMsOf), 0.5),
        crossingMs: quantile(replies.map(crossingMsOf), 0.5),
        stepMs: quantile(replies.map((x) => x.ms), 0.5),
      };
    };
    const runs: Record<LaneName, () => Promise<LaneRun>> = {
      W1: async () => {
        const { stepMs, tokens } = await wholeSession(whole, p, o.decodeTokens);
        return { tps: decodeTps(stepMs), tokens, engineMs: quantile(stepMs, 0.5) };
      },
      R2: onRoute(r2),
      R2_cores_idle: onRoute(r2Idle),
      R3: onRoute(r3),
      RPC2: async () => {
        const { stepMs } = await rpc.measure(false);
        return { tps: decodeTps(stepMs), tokens: [] };
      },
      // the diagnostic lane: both nodes and the driver on cpu0, so no crossing wakes another core
      R2_one_core: async () => {
        await Promise.all([pin(r2.nodes[1].child.pid, 0), pin(Deno.pid, 0)]);
        try {
          return await onRoute(r2)();
        } finally {
          await Promise.all([pin(r2.nodes[1].child.pid, 1), pin(Deno.pid, 1)]);
        }
      },
    };
    // warm-up as long as a turn: first-use allocations and the seams' JIT tiers
    for (const lane of LANES) await runs[lane]();
    const rounds: Record<LaneName, LaneRun>[] = [];
    for (let r = 0; r < o.rounds; r++) {
      const round = {} as Record<LaneName, LaneRun>;
      for (let k = 0; k < LANES.length; k++) {
        const lane = LANES[(r + k) % LANES.length];
        round[lane] = await runs[lane]();
      }
      rounds.push(round);
    }
    const sameTokens = rounds.every((x) =>
      ["R2", "R3", "R2_one_core", "R2_cores_idle"].every((l) =>
        x[l as LaneName].tokens.join() === x.W1.tokens.join()
      )
    );
    const ratio = (lane: LaneName) => quantile(rounds.map((x) => x[lane].tps / x.W1.tps), 0.5);
    const median = (f: (x: Record<LaneName, LaneRun>) => number) => quantile(rounds.map(f), 0.5);

    say("pinned: 8 sessions on the placed route of 2 against C2, in turns");
    const split8 = placedSplit(o.header, o.fileSize, o.nLayer);
    const same8 = split8.map(formatRange).join() === o.split2.map(formatRange).join();
    const r8 = same8 ? r2 : await route(split8, [0, 1]);
    // the same nodes without batch invariance: what the invariant kernels cost at 4 a batch
    const r8Plain = await route(split8, [0, 1], ["--no-batch-invariant"]);
    const many = await manyInTurns(o, r8, r8Plain);

    say("pinned: what each node holds beside its engine's buffers");
    const memory = await nodeMemory(r2);

    const w1EngineMs = median((x) => x.W1.engineMs!);
    const r2EngineMs = median((x) => x.R2.engineMs!);
    const r2CrossingMs = median((x) => x.R2.crossingMs!);
    return {
      cpus: {
        W1: "0",
        R2: "0,1",
        R3: "0,1,0",
        RPC2: "0,1 (llama-server on 1)",
        R2_one_core: "0,0 (the driver on 0 too)",
        R2_cores_idle: "0,1 (--keep-awake 0)",
        C2: "0,1",
        driver: "1",
      },
      rounds: rounds.map((x) => Object.fromEntries(LANES.map((l) => [l, x[l].tps]))),
      same_tokens: sameTokens,
      tps: Object.fromEntries(LANES.map((l) => [l, median((x) => x[l].tps)])),
      floor,
      step: {
        w1_engine_ms: w1EngineMs,
        r2_step_ms: median((x) => x.R2.stepMs!),
        r2_engine_ms: r2EngineMs,
        r2_crossing_ms: r2CrossingMs,
        r3_engine_ms: median((x) => x.R3.engineMs!),
        r3_crossing_ms: median((x) => x.R3.crossingMs!),
        one_core_crossing_ms: median((x) => x.R2_one_core.crossingMs!),
        cores_idle_engine_ms: median((x) => x.R2_cores_idle.engineMs!),
        cores_idle_crossing_ms: median((x) => x.R2_cores_idle.crossingMs!),
      },
      many: { split: split8.map(formatRange).join(","), ...many },
      memory,
      checks: {
        r2_vs_w1: ratio("R2"),
        r3_vs_w1: ratio("R3"),
        r2_engine_vs_w1: r2EngineMs / w1EngineMs,
        crossing_minus_floor_ms: r2CrossingMs - floor.one_way_ms,
        node_cpu_beyond_engine: many.cpu_beyond_engine,
        r2_8_vs_c2: many.r2_vs_c2,
        r2_vs_rpc2: quantile(rounds.map((x) => x.R2.tps / x.RPC2.tps), 0.5),
        node_memory_beyond_mb: Math.max(...memory.map((m) => m.beyond_mb)),
      },
    };
  } finally {
    for (const close of closers.toReversed()) await close().catch(() => {});
    await pin(Deno.pid, cores);
  }
}

/** A route of node processes, node i on cpus[i]. */
async function startPinnedRoute(
  o: PinnedOptions,
  split: readonly LayerRange[],
  cpus: readonly number[],
  closers: (() => Promise<void>)[],
  nodeArgs?: readonly string[],
): Promise<LocalRoute> {
  const local = await startLocalRoute({
    modelPath: o.modelPath,
    split,
    nLayer: o.nLayer,
    backend: o.backend,
    threads: 1,
    transport: "direct",
    maxSessions: 16,
    nodeArgs,
  });
  closers.push(() => local.close());
  await Promise.all(local.nodes.map((n, i) => pin(n.child.pid, cpus[i])));
  return local;
}

/** llama.cpp RPC of the same split: its servers on cpu0 and cpu1, llama-server beside the driver. */
async function startPinnedRpc(o: PinnedOptions, closers: (() => Promise<void>)[]) {
  const tools = await ensureRpcTools();
  const ports = o.split2.map(() => freePort());
  const servers = ports.map((port) => {
    const [cmd, ...args] = rpcServerArgs(tools, "127.0.0.1", port, 1);
    return new Deno.Command(cmd, { args, stdin: "null", stdout: "null", stderr: "null" }).spawn();
  });
  closers.push(async () => {
    for (const s of servers) s.kill("SIGTERM");
    await Promise.all(servers.map((s) => s.status));
  });
  await Promise.all(servers.map((s, i) => pin(s.pid, i)));
  for (const port of ports) await waitListening("127.0.0.1", port);
  const driver = await startRpcDriver(tools, ports.map((p) => `127.0.0.1:${p}`), {
    modelPath: o.modelPath,
    split: o.split2,
    threads: 1,
    promptTokens: o.promptTokens,
    decodeTokens: o.decodeTokens,
  });
  closers.push(() => driver.close());
  await pin(driver.pid, 1);
  return driver;
}

/**
 * One way on loopback TCP from this process (cpu1) to an echo process on cpu0, a decode step's
 * frame each way, each round trip after an idle gap as a node's between its steps: the least a
 * crossing between two cores can cost here, the runtime's wake on both sides included.
 */
async function loopbackFloor(nEmbd: number) {
  const echo = await startEcho();
  try {
    await pin(echo.pid, 0);
    const tcp = await tcpRoundTrip(echo.ports.tcp, encodeFrame(hiddenStepFrame(nEmbd)));
    try {
      const idle = await timed(200, tcp.once, IDLE_GAP_MS);
      const busy = await timed(200, tcp.once);
      return {
        gap_ms: IDLE_GAP_MS,
        one_way_ms: idle.p50_ms / 2,
        one_way_ms_p95: idle.p95_ms / 2,
        one_way_ms_back_to_back: busy.p50_ms / 2,
      };
    } finally {
      tcp.close();
    }
  } finally {
    await echo.close();
  }
}

/**
 * 8 sessions on the route of 2 (nodes on cpu0 and cpu1) and C2 (two whole-model processes, one
 * a core, 4 sessions each, stepping at once), a run of each in turn; the nodes' CPU time beside
 * their engines' over the route's runs.
 */
async function manyInTurns(o: PinnedOptions, local: LocalRoute, plain: LocalRoute) {
  const sessions = 8;
  const c2: EngineProcess[] = [];
  try {
    for (const cpu of [0, 1]) {
      // 4 of the 8 sessions' prompts each
      const p = await spawnBatchedWhole(
        { modelPath: o.modelPath, tokens: o.decodeTokens, threads: 1, backend: o.backend },
        4,
        sessions,
      );
      c2.push(p);
      await pin(p.pid, cpu);
    }
    // timed as the route is, on this clock from the first step to the last (the processes' own
    // engine times, which leave out their pipes and this driver, are kept beside it)
    const c2Run = async () => {
      const ready = [];
      for (const [k, p] of c2.entries()) {
        ready.push(await prefilled(p, [0, 1, 2, 3].map((s) => prompt(16 + 4 * (4 * k + s), 4 * k + s))));
      }
      const t0 = performance.now();
      const rates = await Promise.all(ready.map((r) => stepTogether(r, o.decodeTokens)));
      const wall = (sessions * o.decodeTokens) / ((performance.now() - t0) / 1000);
      await Promise.all(ready.flatMap((r) => r.seqs.map((s) => r.p.release(s))));
      return { wall, engine: rates[0] + rates[1] };
    };
    const pids = local.nodes.map((n) => n.child.pid);
    const counters = () => Promise.all(pids.map(cpuMs));
    await decodeRun(local, sessions, o.decodeTokens, "warm8");
    await decodeRun(plain, sessions, o.decodeTokens, "warm8");
    await c2Run();
    const runs: { r2: number; c2: number; c2_engine_time: number; r2_not_invariant: number }[] = [];
    let work = 0, spinner = 0, engine = 0, tokens = 0;
    for (let r = 0; r < o.manyRounds; r++) {
      const before = await counters();
      const route = await decodeRun(local, sessions, o.decodeTokens, `many${r}`);
      const after = await counters();
      pids.forEach((_, i) => {
        work += after[i].work - before[i].work;
        engine += after[i].engine - before[i].engine;
        spinner += after[i].spinner - before[i].spinner;
      });
      tokens += sessions * o.decodeTokens;
      const c2Rates = await c2Run();
      runs.push({
        r2: route.tokPerS,
        c2: c2Rates.wall,
        c2_engine_time: c2Rates.engine,
        r2_not_invariant: (await decodeRun(plain, sessions, o.decodeTokens, `plain${r}`)).tokPerS,
      });
    }
    return {
      sessions,
      runs,
      r2_tps: quantile(runs.map((x) => x.r2), 0.5),
      c2_tps: quantile(runs.map((x) => x.c2), 0.5),
      r2_vs_c2: quantile(runs.map((x) => x.r2 / x.c2), 0.5),
      r2_not_invariant_vs_c2: quantile(runs.map((x) => x.r2_not_invariant / x.c2), 0.5),
      /** both nodes, over the runs (the prefills included): CPU ms beside the engine's calls a token */
      cpu_beyond_engine_ms_per_token: work / tokens,
      /** the engines' own CPU a token (the threads their calls ran on) */
      engine_ms_per_token: engine / tokens,
      /** the keep-awake spinners' CPU, from the cores' idle time (not counted as the nodes' work) */
      spinner_ms_per_token: spinner / tokens,
      cpu_beyond_engine: work / engine,
    };
  } finally {
    await Promise.all(c2.map((p) => p.close()));
  }
}

/** Each node's resident high-water mark against what its engine says it holds. */
async function nodeMemory(local: LocalRoute) {
  const seams = new GrpcSeams();
  try {
    return await Promise.all(local.nodes.map(async (n) => {
      const i = await seams.info((n.ready.urls as string[])[0]);
      const engine = Number(i.weightBytes + i.kvBytes + i.computeBytes);
      const hwm = await peakRss(n.child.pid);
      return {
        layers: `${i.range?.start}:${i.range?.end}`,
        peak_rss_mb: hwm / 2 ** 20,
        weights_mb: Number(i.weightBytes) / 2 ** 20,
        kv_mb: Number(i.kvBytes) / 2 ** 20,
        compute_mb: Number(i.computeBytes) / 2 ** 20,
        kv_cells: i.kvCells,
        beyond_mb: (hwm - engine) / 2 ** 20,
      };
    }));
  } finally {
    seams.close();
  }
}
