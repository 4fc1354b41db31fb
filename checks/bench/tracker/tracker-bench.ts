// `strata bench tracker`: the control plane at network scale. Real tracker replicas (separate
// processes) on a real PostgreSQL, thousands of simulated nodes over the trackers' protocol
// (agents.ts), a load generator asking for routes, churn, and one replica killed half-way.
// The model is a synthetic llama of many small layers (its reference certified once and
// cached), so probes are cheap and a route crosses many nodes.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import postgres from "postgres";
import { NodeInfoSchema } from "../../../src/gen/strata/seam/v1/seam_pb.ts";
import { synthModel } from "../../../src/model/synth.ts";
import { hexToBytes } from "../../../src/bytes/hex.ts";
import { openReference } from "../../../src/tracker/admission/reference.ts";
import { headerModel, shardMemory } from "../../../src/engine/memory-cap.ts";
import { sha256File } from "../../../server/model/hash.ts";
import { readHeader } from "../../../server/model/facts.ts";
import { ensureReference } from "../../../server/model/reference-file.ts";
import { ServiceProcess } from "../../../server/process/service-process.ts";
import { serveSeams } from "../../../node-apis/seam/grpc.ts";
import { startPostgres } from "../../../server/toolchain/postgres.ts";
import { sessionEnds, trackerClient } from "../../../node-apis/tracker/client.ts";
import { cacheDir } from "../../../server/process/paths.ts";
import { progress } from "../../../server/log/progress.ts";
import { Agents, BATCH_TOKENS, drawAgents, KV_CELLS, MAX_SESSIONS } from "./agents.ts";
import { equalPlacement, routesOver, routeTokS, smallCases } from "./placement-cases.ts";
import { ProbeAnswerer } from "./probe-answerer.ts";
import { offerLoad } from "./load.ts";

export interface TrackerBenchOptions {
  readonly nodes: number;
  readonly replicas: number;
  /** the measured window, after every node joined */
  readonly seconds: number;
  /**
   * Routes asked for at the offered rate before the window, not counted in it: V8 compiles the
   * trackers' route path as it runs (nodes joining never call it), and the first second of routes
   * ran slower than the rest. Reported apart (`warmup`).
   */
  readonly warmupSeconds: number;
  /** nodes leaving (and as many joining) per minute, as a fraction of the network */
  readonly churnPerMin: number;
  /** route requests offered a second (open loop); 0: as fast as `workers` can */
  readonly rate: number;
  /** route requests in flight at once, when `rate` is 0 */
  readonly workers: number;
  /** tokens a simulated session decodes before it ends (at its route's simulated rate) */
  readonly sessionTokens: number;
  readonly leaseMs: number;
  readonly layers: number;
  readonly seed: number;
  /** kill one replica half-way through the window */
  readonly kill: boolean;
}

export const TRACKER_BENCH_DEFAULTS: TrackerBenchOptions = {
  nodes: 1000,
  replicas: 3,
  seconds: 60,
  warmupSeconds: 5,
  churnPerMin: 0.01,
  rate: 1000,
  workers: 64,
  sessionTokens: 16,
  leaseMs: 15_000,
  layers: 48,
  seed: 1,
  kill: true,
};

const mean = (xs: number[]) => xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
const quantile = (xs: number[], q: number) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const rssMb = (pid: number) => {
  try {
    const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/VmRSS:\s+(\d+) kB/);
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
};
/** CPU seconds a process has used (user + system). */
const cpuSeconds = (pid: number | "self") => {
  try {
    const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A synthetic model of `layers` small layers and its signed reference, made once. */
async function benchModel(layers: number) {
  const path = cacheDir(`bench-tracker/llama-${layers}.gguf`);
  try {
    await Deno.stat(path);
  } catch {
    await Deno.mkdir(cacheDir("bench-tracker"), { recursive: true });
    await Deno.writeFile(path, synthModel({ arch: "llama", nLayer: layers, seed: 7 }));
  }
  return { path, reference: await ensureReference(path, { backend: "cpu" }) };
}

export async function benchTracker(opts: Partial<TrackerBenchOptions> = {}) {
  const o = { ...TRACKER_BENCH_DEFAULTS, ...opts };
  const model = await benchModel(o.layers);
  const header = await readHeader(model.path);
  const artifact = await sha256File(model.path);
  const rangeModel = headerModel(header, (await Deno.stat(model.path)).size);
  const nLayer = rangeModel.manifest.nLayer;
  const budget = {
    maxSequences: MAX_SESSIONS,
    batchTokens: BATCH_TOKENS,
    batchInvariant: true,
    flashAttention: true,
  };
  const capOf = (layers: number) =>
    Math.ceil(shardMemory(rangeModel, { start: 0, end: Math.min(layers, nLayer) }, KV_CELLS, budget).total);
  const reference = await openReference(await Deno.readFile(model.reference), { artifact });
  const answerer = new ProbeAnswerer(reference);
  const seams = await serveSeams(
    answerer.serve,
    () => Promise.resolve(create(NodeInfoSchema, { node: "simulated nodes" })),
    "127.0.0.1",
    0,
  );
  const pg = await startPostgres();
  const token = crypto.randomUUID();
  const replicas: ServiceProcess[] = [];
  const stats = postgres(pg.url, { max: 1, onnotice: () => {} });
  let agents: Agents | undefined;
  const clients: Array<ReturnType<typeof trackerClient>> = [];
  try {
    for (let i = 0; i < o.replicas; i++) {
      replicas.push(
        await ServiceProcess.start(`tracker r${i}`, [
          "tracker",
          "--model",
          model.path,
          "--reference",
          model.reference,
          "--listen",
          "127.0.0.1:0",
          "--db",
          pg.url,
          "--node-token",
          token,
          "--lease-ms",
          String(o.leaseMs),
          "--spot-check-ms",
          "0",
        ]),
      );
    }
    const urls = replicas.map((r) => String(r.ready.url));
    // client i calls replica i first, then the others in turn
    for (let i = 0; i < urls.length; i++) {
      clients.push(trackerClient([...urls.slice(i), ...urls.slice(0, i)].join(",")));
    }
    agents = new Agents({
      clients: clients.map((c) => c.client),
      token,
      artifact,
      url: String(seams.url),
      leaseMs: o.leaseMs,
    });

    // 1. every node joins: asks where to go, registers, is probed
    const joinStarted = performance.now();
    const specs = drawAgents(o.nodes, o, capOf);
    const bar = progress(`bench tracker: ${o.nodes} nodes joining`, o.nodes);
    let next = 0;
    // many at once: the placement leader places the asks of a batch together
    await Promise.all(Array.from({ length: 256 }, async () => {
      while (next < specs.length) {
        await agents!.join(specs[next++]);
        bar.update(next, o.nodes);
      }
    }));
    bar.finish(`${agents.all.size} joined`);
    const admittedShare = () => [...agents!.all.values()].filter((a) => a.admitted).length / agents!.all.size;
    const joinDeadline = Date.now() + Math.max(120_000, o.nodes * 20);
    while (admittedShare() < 0.98 && Date.now() < joinDeadline) await sleep(250);
    const joinSeconds = (performance.now() - joinStarted) / 1000;

    const artifactBytes = hexToBytes(artifact);
    // each load client ends its sessions as a gateway does: in batches while a Done is in flight
    const ends = clients.map((c) => sessionEnds(c.client));

    // 2. the warm-up: routes at the offered rate, each session ended at once
    const warmLatencies: number[] = [];
    const warm = await offerLoad({
      rate: o.rate,
      workers: o.workers,
      until: Date.now() + o.warmupSeconds * 1000,
    }, async (dueAt, i) => {
      const k = i % clients.length;
      const sessionId = crypto.randomUUID();
      try {
        await clients[k].client.route({ artifactSha256: artifactBytes, sessionId, count: 1 }, {
          timeoutMs: 10_000,
        });
        warmLatencies.push(performance.now() - dueAt);
        void ends[k].end(sessionId).catch(() => {});
      } catch {
        // "busy" and the like: the window counts those
      }
    });

    // 3. the window: routes asked for (load.ts), churn, a replica killed
    const writes0 = await dbWrites(stats);
    const cpu0 = { replicas: replicas.map((r) => cpuSeconds(r.child.pid)), sim: cpuSeconds("self") };
    const latencies: number[] = [];
    const handedOut: number[] = [];
    const errors = new Map<string, number>();
    let departedRoutes = 0;
    let routes = 0;
    let sessions = 0;
    const windowStart = Date.now();
    const windowEnd = windowStart + o.seconds * 1000;
    const killAt = windowStart + (o.seconds * 1000) / 2;
    let killedAt: number | undefined;
    let killedCpu: number | undefined;
    let lastAnswerOnKilled = 0;
    let killGapMs = 0;
    const pending = new Set<ReturnType<typeof setTimeout>>();
    // the longest time without an answer (a route, or "all busy") for the requests sent to the
    // killed replica, from the kill on; and the slowest answer in each second after it
    const onAnswer = (k: number, ms: number) => {
      const now = Date.now();
      if (killedAt !== undefined && now - killedAt < 10_000) {
        const second = Math.floor((now - killedAt) / 1000);
        aroundKill.set(second, Math.max(aroundKill.get(second) ?? 0, ms));
      }
      if (k !== 0) return;
      if (killedAt !== undefined) {
        killGapMs = Math.max(killGapMs, now - Math.max(lastAnswerOnKilled, killedAt));
      }
      lastAnswerOnKilled = now;
    };
    const aroundKill = new Map<number, number>();
    // one gateway's request: a route for a new session; one through a node that has left fails
    // to open, and the gateway asks again, naming it
    const request = async (dueAt: number, i: number) => {
      const k = i % clients.length;
      const c = clients[k];
      const sessionId = crypto.randomUUID();
      let avoid: string[] = [];
      for (let attempt = 0, t0 = dueAt; attempt < 3; attempt++, t0 = performance.now()) {
        try {
          const r = await c.client.route(
            { artifactSha256: artifactBytes, sessionId, count: 1, avoidNodes: avoid },
            { timeoutMs: 10_000 },
          );
          onAnswer(k, performance.now() - t0);
          latencies.push(performance.now() - t0);
          routes++;
          const now = Date.now();
          const hops = r.routes[0].hops.map((h) => ({
            node: h.node,
            range: h.range!,
            agent: agents!.all.get(h.node),
          }));
          const gone = hops.filter((h) => !h.agent).map((h) => h.node);
          if (gone.length > 0) {
            departedRoutes++;
            avoid = [...avoid, ...gone];
            continue;
          }
          const rate = routeTokS(hops.map((h) => ({ spec: h.agent!.spec, range: h.range })));
          handedOut.push(rate);
          // the session decodes `sessionTokens` at the route's rate (at most 10 s), then ends
          const holdMs = Math.min(10_000, (o.sessionTokens / rate) * 1000);
          agents!.serve(hops.map((h) => h.node), sessionId, now + holdMs);
          sessions++;
          const t = setTimeout(() => {
            pending.delete(t);
            void ends[k].end(sessionId).catch(() => {});
          }, holdMs);
          pending.add(t);
          return;
        } catch (e) {
          const code = (e as { rawMessage?: string }).rawMessage ?? String(e);
          errors.set(code, (errors.get(code) ?? 0) + 1);
          // "all routes are busy" is an answer too
          if (e instanceof ConnectError && e.code === Code.ResourceExhausted) {
            onAnswer(k, performance.now() - t0);
          }
          if (o.rate <= 0) await sleep(20);
          return;
        }
      }
    };
    // coverage: sampled from the nodes' own view (alive and admitted), every 250 ms
    let covered = 0, samples = 0;
    const coverage = setInterval(() => {
      samples++;
      const have = new Uint8Array(nLayer);
      for (const a of agents!.all.values()) {
        if (!a.alive || !a.admitted || !a.range) continue;
        have.fill(1, a.range.start, a.range.end);
      }
      if (have.every((x) => x === 1)) covered++;
    }, 250);
    // churn: each second, its share of the network leaves (half by Leave, half by vanishing)
    // and as many new nodes join
    let joined = o.nodes, churned = 0, churnCarry = 0;
    const churn = setInterval(() => {
      churnCarry += (o.churnPerMin * o.nodes) / 60;
      const n = Math.floor(churnCarry);
      churnCarry -= n;
      const names = [...agents!.all.keys()];
      for (let i = 0; i < n && names.length > 0; i++) {
        const name = names.splice(Math.floor(Math.random() * names.length), 1)[0];
        void agents!.leave(name, (churned++ & 1) === 0);
      }
      for (const spec of drawAgents(n, o, capOf, joined)) void agents!.join(spec);
      joined += n;
    }, 1000);
    const killer = o.kill && replicas.length > 1
      ? setTimeout(() => {
        killedAt = Date.now();
        killedCpu = cpuSeconds(replicas[0].child.pid);
        replicas[0].child.kill("SIGKILL");
      }, killAt - Date.now())
      : undefined;
    const load = await offerLoad({ rate: o.rate, workers: o.workers, until: windowEnd }, request);
    for (const t of pending) clearTimeout(t);
    clearInterval(coverage);
    clearInterval(churn);
    clearTimeout(killer);
    const seconds = (Date.now() - windowStart) / 1000;
    const writes1 = await dbWrites(stats);
    const cpuShare = {
      replicas: replicas.map((r, i) =>
        ((i === 0 && killedCpu !== undefined ? killedCpu : cpuSeconds(r.child.pid)) - cpu0.replicas[i]) /
        seconds
      ),
      simulator: (cpuSeconds("self") - cpu0.sim) / seconds,
    };

    // 4. after: who the surviving replicas see, the placement beside equal layers
    const alive = [...agents.all.values()].filter((a) => a.alive && a.range);
    const survivor = clients[clients.length - 1];
    // asked about in chunks (one answer for every node would pass a message size limit), each
    // again until answered: a replica slow to answer has not lost the nodes it did not name
    const seen = new Set<string>(), answered = new Set<string>();
    // what the survivor said of the nodes it does not see live
    const state = new Map<string, { admission: string; live: boolean }>();
    let unanswered = 0;
    const ask = async (named: string[]) => {
      for (let i = 0; i < named.length; i += 1000) {
        const names = named.slice(i, i + 1000);
        let r;
        for (let tries = 0; tries < 5 && !r; tries++) {
          r = await survivor.client.nodes({ nodes: names }, { timeoutMs: 60_000 }).catch(() => undefined);
        }
        if (!r) unanswered += names.length;
        else for (const n of names) answered.add(n);
        for (const n of r?.nodes ?? []) {
          if (n.live) seen.add(n.node);
          else state.set(n.node, n);
        }
      }
    };
    await ask(alive.map((a) => a.spec.name));
    // a node that registered with another replica in the last second or two is not known to
    // this one yet (replicas pull each other's changes once per sync interval): the nodes not
    // seen are asked about again after a few intervals, and only those still missing are lost
    const missing = (a: typeof alive[number]) =>
      a.alive && a.admitted && answered.has(a.spec.name) && !seen.has(a.spec.name);
    const notSeenAtFirst = alive.filter(missing).length;
    if (notSeenAtFirst > 0) {
      await sleep(3000);
      await ask(alive.filter(missing).map((a) => a.spec.name));
    }
    const asked = Date.now();
    const lostNodes = alive.filter(missing);
    // a node whose last answered beat is older than a lease lapsed because its beats were late
    // or unanswered (the simulator or a saturated replica), not because a replica forgot it
    const lapsed = lostNodes.filter((a) => asked - a.lastBeat > o.leaseMs).length;
    const lost = lostNodes.length;
    const placed = routesOver(alive.map((a) => ({ spec: a.spec, range: a.range! })), nLayer);
    const equal = equalPlacement(alive.map((a) => a.spec), nLayer);
    const equalRoutes = routesOver(equal.placed, nLayer);
    const live = replicas.filter((_, i) => !(o.kill && i === 0 && replicas.length > 1));
    const small = await smallCases(o, capOf, rangeModel, artifact);
    return {
      nodes: o.nodes,
      replicas: o.replicas,
      layers: nLayer,
      seconds,
      join_seconds: joinSeconds,
      probes_answered: answerer.answered,
      warmup: {
        seconds: o.warmupSeconds,
        routes_offered: warm.offered,
        routes: warmLatencies.length,
        route_p50_ms: quantile(warmLatencies, 0.5),
        route_p99_ms: quantile(warmLatencies, 0.99),
      },
      route_offered_rps: o.rate > 0 ? load.offered / seconds : null,
      route_rps: routes / seconds,
      routes_shed: load.shed,
      route_p50_ms: quantile(latencies, 0.5),
      route_p99_ms: quantile(latencies, 0.99),
      route_errors: Object.fromEntries(errors),
      sessions,
      // session ends reached the trackers in batched Done calls (a call per end before)
      done_calls_per_s: ends.reduce((n, e) => n + e.calls, 0) / seconds,
      sessions_per_done: ends.reduce((n, e) => n + e.carried, 0) /
        Math.max(1, ends.reduce((n, e) => n + e.calls, 0)),
      coverage: samples ? covered / samples : 0,
      churn_per_min: o.churnPerMin,
      churned,
      routes_to_departed_nodes: departedRoutes,
      routes_to_departed_share: routes ? departedRoutes / routes : 0,
      handed_out_tok_s_mean: mean(handedOut),
      placement: {
        routes: placed.routes,
        aggregate_tok_s: placed.aggregate,
        route_tok_s_mean: placed.mean,
      },
      equal_layers: {
        parts: equal.parts,
        nodes_used: equal.placed.length,
        routes: equalRoutes.routes,
        aggregate_tok_s: equalRoutes.aggregate,
        route_tok_s_mean: equalRoutes.mean,
      },
      placement_vs_equal: equalRoutes.aggregate > 0 ? placed.aggregate / equalRoutes.aggregate : null,
      handed_out_vs_equal: equalRoutes.mean > 0 ? mean(handedOut) / equalRoutes.mean : null,
      placement_small_cases: small,
      killed_replica: o.kill && replicas.length > 1
        ? {
          gap_ms: killGapMs,
          // the slowest route answer in each second from the kill (0) on
          slowest_answer_ms_by_second: Object.fromEntries(
            [...aroundKill].sort((a, b) => a[0] - b[0]).map(([s, ms]) => [s, Math.round(ms)]),
          ),
          nodes_alive: alive.length,
          nodes_lost: lost,
          nodes_not_seen_at_first: notSeenAtFirst,
          // up to 5 nodes lost: what the survivor knows of each, and the node's own view
          lost_detail: lostNodes.slice(0, 5).map((a) => ({
            node: a.spec.name,
            known: state.has(a.spec.name),
            admission: state.get(a.spec.name)?.admission ?? null,
            range: `${a.range!.start}:${a.range!.end}`,
            ms_since_own_beat: asked - a.lastBeat,
          })),
          nodes_lost_with_lapsed_lease: lapsed,
          nodes_unanswered: unanswered,
        }
        : null,
      db_writes_per_s: (writes1.commits - writes0.commits) / seconds,
      db_rows_per_s: (writes1.rows - writes0.rows) / seconds,
      rss_mb_per_replica: live.map((r) => rssMb(r.child.pid)),
      // cores busy on average through the window (the killed replica's until it died)
      cpu_cores: cpuShare,
      heartbeat_p50_ms: quantile(agents.beatMs, 0.5),
      heartbeat_p99_ms: quantile(agents.beatMs, 0.99),
      heartbeat_late_p99_ms: quantile(agents.beatLateMs, 0.99),
      agent_counts: agents.counts,
      join_failures: Object.fromEntries(agents.joinFailures),
    };
  } finally {
    agents?.close();
    for (const c of clients) c.close();
    await stats.end({ timeout: 1 }).catch(() => {});
    for (const r of replicas) await r.stop().catch(() => {});
    await seams.close();
    await pg.stop();
  }
}

/** Transactions committed and rows written, database-wide. */
async function dbWrites(sql: postgres.Sql) {
  const [d] = await sql`select xact_commit from pg_stat_database where datname = current_database()`;
  const [t] =
    await sql`select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) as rows from pg_stat_user_tables`;
  return { commits: Number(d.xact_commit), rows: Number(t.rows) };
}

export function printTrackerBench(r: Awaited<ReturnType<typeof benchTracker>>): string {
  const f = (x: number, d = 1) => x.toFixed(d);
  return [
    `bench tracker: ${r.nodes} simulated nodes, ${r.replicas} replicas on PostgreSQL, ${r.layers} layers, ${
      f(r.seconds, 0)
    } s`,
    `  joined in ${f(r.join_seconds)} s (${r.probes_answered} admission probes answered)`,
    `  warm-up (not counted below): ${r.warmup.routes} routes of ${r.warmup.routes_offered} in ${r.warmup.seconds} s, p50 ${
      f(r.warmup.route_p50_ms, 2)
    } ms, p99 ${f(r.warmup.route_p99_ms, 2)} ms`,
    `  routes: ${f(r.route_rps)} /s${
      r.route_offered_rps === null ? "" : ` of ${f(r.route_offered_rps)} offered (${r.routes_shed} shed)`
    }, p50 ${f(r.route_p50_ms, 2)} ms, p99 ${f(r.route_p99_ms, 2)} ms; errors ${
      JSON.stringify(r.route_errors)
    }`,
    `  session ends: ${f(r.done_calls_per_s)} Done calls/s, ${f(r.sessions_per_done, 2)} sessions each`,
    `  coverage ${
      f(100 * r.coverage)
    } % of the time; churn ${r.churned} nodes; ${r.routes_to_departed_nodes} routes through a departed node`,
    `  placement: ${r.placement.routes} routes, ${
      f(r.placement.aggregate_tok_s)
    } tok/s in all; equal layers (${r.equal_layers.parts} parts): ${r.equal_layers.routes} routes, ${
      f(r.equal_layers.aggregate_tok_s)
    } tok/s; ratio ${r.placement_vs_equal === null ? "-" : f(r.placement_vs_equal, 2)}`,
    `  handed-out routes ${f(r.handed_out_tok_s_mean)} tok/s mean vs equal-layer routes ${
      f(r.equal_layers.route_tok_s_mean)
    }`,
    ...r.placement_small_cases.map((c) =>
      `  ${c.nodes} nodes (${c.cases} draws): placer ${f(100 * c.placer_vs_best)} %, equal layers ${
        f(100 * c.equal_vs_best)
      } % of the best split`
    ),
    r.killed_replica
      ? `  replica killed: longest gap ${r.killed_replica.gap_ms} ms, nodes lost ${r.killed_replica.nodes_lost} of ${r.killed_replica.nodes_alive} (${r.killed_replica.nodes_lost_with_lapsed_lease} with a lapsed lease)`
      : "  no replica killed",
    `  heartbeats: p50 ${f(r.heartbeat_p50_ms)} ms, p99 ${f(r.heartbeat_p99_ms)} ms; sent late by up to ${
      f(r.heartbeat_late_p99_ms)
    } ms (p99)`,
    `  database: ${f(r.db_writes_per_s)} commits/s, ${f(r.db_rows_per_s)} rows/s; replica RSS ${
      r.rss_mb_per_replica.map((x) => f(x, 0)).join(", ")
    } MB`,
  ].join("\n");
}
