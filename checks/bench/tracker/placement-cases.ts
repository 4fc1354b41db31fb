// Placement against the best there is, for networks small enough to search: a few simulated
// nodes, placed by the tracker's own placer (in process), by equal layers, and by an exhaustive
// search over every way of splitting them into routes. A route's rate is the latency model's
// (agents.ts): each hop's time for its layers at its layer rate, plus its one-way latency; a
// network's worth is the sum of its disjoint routes' rates.
import { create } from "@bufbuild/protobuf";
import { hexToBytes } from "../../../src/bytes/hex.ts";
import {
  HeartbeatRequestSchema,
  PlaceRequestSchema,
  RegisterRequestSchema,
} from "../../../src/gen/strata/tracker/v1/tracker_pb.ts";
import type { RangeModel } from "../../../src/engine/memory-cap.ts";
import { MemoryStorage } from "../../../src/tracker/membership/storage.ts";
import { TrackerCore } from "../../../src/tracker/core/tracker-core.ts";
import { type AgentSpec, drawAgents, KV_CELLS, MAX_SESSIONS, placeAsk, rangeRate } from "./agents.ts";
import { chooseRoutes } from "../../../src/tracker/routes/route-choice.ts";
import type { Candidate } from "../../../src/tracker/routes/select.ts";

type Placed = Array<{ spec: AgentSpec; range: { start: number; end: number } }>;

/** A route's simulated decode rate: each hop's time for its range, and each crossing's latency. */
export function routeTokS(
  hops: readonly { spec: AgentSpec; range: { start: number; end: number } }[],
): number {
  const ms = hops.reduce((t, h) => t + 1000 / rangeRate(h.spec, h.range) + h.spec.latencyMs, 0);
  return 1000 / ms;
}

/** Disjoint routes over the given placement, as the tracker chooses them, and their rates. */
export function routesOver(
  placed: Array<{ spec: AgentSpec; range: { start: number; end: number } }>,
  nLayer: number,
) {
  const by = new Map(placed.map((p) => [p.spec.name, p]));
  const cands: Candidate[] = placed.map((p) => ({
    node: p.spec.name,
    url: "",
    range: p.range,
    load: 0,
    tokensPerS: rangeRate(p.spec, p.range),
    kvCells: KV_CELLS,
    sessionCells: KV_CELLS / MAX_SESSIONS,
    freeSlots: MAX_SESSIONS,
  }));
  let routes: Candidate[][] = [];
  try {
    routes = chooseRoutes(cands, nLayer, cands.length);
  } catch {
    routes = [];
  }
  const rates = routes.map((rt) => routeTokS(rt.map((c) => by.get(c.node)!)));
  return { routes: routes.length, aggregate: rates.reduce((a, b) => a + b, 0), mean: mean(rates) };
}

/** Equal-layer placement of the same nodes: the model in equal parts sized to the median cap,
 *  dealt round; a node whose cap is under its part sits out. */
export function equalPlacement(specs: readonly AgentSpec[], nLayer: number) {
  const caps = specs.map((s) => s.capLayers).sort((a, b) => a - b);
  const parts = Math.max(1, Math.ceil(nLayer / caps[Math.floor(caps.length / 2)]));
  const bounds = Array.from({ length: parts + 1 }, (_, i) => Math.round((i * nLayer) / parts));
  const placed: Array<{ spec: AgentSpec; range: { start: number; end: number } }> = [];
  let k = 0;
  for (const spec of specs) {
    const part = k % parts;
    const range = { start: bounds[part], end: bounds[part + 1] };
    if (spec.capLayers >= range.end - range.start) {
      placed.push({ spec, range });
      k++;
    }
  }
  return { parts, placed };
}

/** The fastest route over exactly these nodes: the fastest take as many layers as their caps
 *  hold (a hop's time is linear in its layers), every node at least one; undefined when their
 *  caps cannot hold the model or they are more than its layers. */
function bestRouteOver(nodes: readonly AgentSpec[], nLayer: number): number | undefined {
  if (nodes.length > nLayer || nodes.reduce((n, a) => n + a.capLayers, 0) < nLayer) return undefined;
  const byRate = [...nodes].sort((a, b) => b.layerRate - a.layerRate);
  const layers = byRate.map(() => 1);
  let left = nLayer - nodes.length;
  for (let i = 0; i < byRate.length && left > 0; i++) {
    const more = Math.min(left, byRate[i].capLayers - 1);
    layers[i] += more;
    left -= more;
  }
  const ms = byRate.reduce((t, a, i) => t + (1000 * layers[i]) / a.layerRate + a.latencyMs, 0);
  return 1000 / ms;
}

/** The most aggregate rate any split of the nodes into disjoint routes gives (some may sit
 *  out): every subset's best route, then the best partition (3^n; n ≤ 12). */
export function optimalAggregate(nodes: readonly AgentSpec[], nLayer: number): number {
  const n = nodes.length;
  if (n > 12) throw new RangeError("the exhaustive search takes 12 nodes at most");
  const route = new Float64Array(1 << n);
  for (let m = 1; m < 1 << n; m++) {
    route[m] = bestRouteOver(nodes.filter((_, i) => m & (1 << i)), nLayer) ?? 0;
  }
  const best = new Float64Array(1 << n);
  for (let m = 1; m < 1 << n; m++) {
    // the lowest node either sits out or is in one route with others of m
    const low = m & -m;
    let b = best[m ^ low];
    for (let t = m; t > 0; t = (t - 1) & m) {
      if ((t & low) && route[t] > 0) b = Math.max(b, route[t] + best[m ^ t]);
    }
    best[m] = b;
  }
  return best[(1 << n) - 1];
}

/** Where the tracker's placer puts these nodes: each asks, registers the range it got with
 *  the rate it measures there, and follows the plan's moves as its heartbeats bring them (the
 *  placer replans by measured speeds at most every 30 s; the clock here jumps past that). */
export async function placerPlacement(
  nodes: readonly AgentSpec[],
  model: RangeModel,
  artifact: string,
): Promise<Placed> {
  const clock = { now: 1_000_000 };
  const core = await TrackerCore.open({
    storage: new MemoryStorage(),
    model: {
      artifact,
      nLayer: model.manifest.nLayer,
      manifest: model.manifest,
      kv: model.kv,
      graph: model.graph,
    },
    leaseMs: 1e9,
    probe: () => Promise.resolve({ ok: true, maxAbsDiff: 0, allowed: 1, detail: "" }),
    clock: () => clock.now,
  });
  const register = (a: AgentSpec, range: { start: number; end: number }) =>
    core.register(create(RegisterRequestSchema, {
      node: a.name,
      urls: ["http://sim:1"],
      shard: {
        artifactSha256: hexToBytes(artifact),
        range,
        engine: "native-cpu",
        kvCells: KV_CELLS,
        maxSessions: MAX_SESSIONS,
        decodeTokensPerS: rangeRate(a, range),
      },
    }));
  for (const a of nodes) {
    try {
      const { range } = await core.place(create(PlaceRequestSchema, placeAsk(a, hexToBytes(artifact))));
      register(a, range!);
    } catch {
      // nothing of use fits it: it sits out
    }
  }
  for (let round = 0; round < 3; round++) {
    clock.now += 31_000;
    for (const a of nodes) {
      const r = core.heartbeat(create(HeartbeatRequestSchema, { node: a.name }));
      if (r.known && r.place) register(a, r.place);
    }
  }
  await core.admissionsSettled();
  const plan = core.placement();
  return nodes.flatMap((a) => {
    const range = plan.get(a.name);
    return range ? [{ spec: a, range }] : [];
  });
}

const mean = (xs: number[]) => xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;

/** Networks of a few nodes, several draws each: the placer's and equal layers' aggregate rate
 *  as shares of the best split the search finds. */
export async function smallCases(
  o: { readonly seed: number; readonly layers: number },
  capOf: (layers: number) => number,
  model: RangeModel,
  artifact: string,
) {
  const sizes = [3, 4, 6, 8], draws = 5;
  const rows = [];
  for (const n of sizes) {
    const placer: number[] = [], equal: number[] = [];
    for (let d = 0; d < draws; d++) {
      const nodes = drawAgents(n, { ...o, seed: o.seed * 1000 + n * 10 + d }, capOf);
      const best = optimalAggregate(nodes, model.manifest.nLayer);
      if (best <= 0) continue;
      const placed = routesOver(await placerPlacement(nodes, model, artifact), model.manifest.nLayer);
      const eq = routesOver(equalPlacement(nodes, model.manifest.nLayer).placed, model.manifest.nLayer);
      placer.push(placed.aggregate / best);
      equal.push(eq.aggregate / best);
    }
    rows.push({ nodes: n, cases: placer.length, placer_vs_best: mean(placer), equal_vs_best: mean(equal) });
  }
  return rows;
}
