// Decode tok/s across separate hosts (network namespaces) against the one-way delay of every
// link, beside what the network must cost at least: the engines' time and one delay per crossing.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { formatRange } from "../../src/engine/layer-range.ts";
import { startHostNetwork } from "../hosts/network.ts";
import { rpcAcrossHosts } from "./rpc-hosts.ts";
import { type TimedChat, timedChat } from "./timed-chat.ts";

export interface HostsRun {
  readonly delay_ms: number;
  readonly decode_tps: number;
  readonly ttft_ms: number;
  /** the nodes' compute for one token, summed (from the response's telemetry) */
  readonly engine_ms_per_token: number;
  /** one-way crossings a token makes, as counted: down the route, then the reply (hops + 1) */
  readonly crossings: number;
  readonly budget_tps: number;
  readonly vs_budget: number;
  readonly tokens: number;
  /** llama.cpp RPC with the same split across the same kind of hosts, at this delay */
  readonly rpc_decode_tps?: number;
  /** this route's decode against it */
  readonly route_vs_rpc?: number;
}

export interface HostsReport {
  readonly split: string;
  readonly hosts: { name: string; ip: string }[];
  readonly runs: HostsRun[];
  readonly delay_20_vs_budget?: number;
  /** the route against llama.cpp RPC with 5 ms one-way between hosts */
  readonly delay_5_route_vs_rpc?: number;
  /** ms a token more per ms of one-way delay (least squares over the delays): the route's, RPC's */
  readonly delay_slope_route?: number;
  readonly delay_slope_rpc?: number;
  /** the route's slope over RPC's: what a ms of delay costs the route against what it costs RPC */
  readonly delay_slope_route_vs_rpc?: number;
}

/** The least-squares slope of y over x. */
function slope(points: readonly (readonly [number, number])[]): number | undefined {
  if (points.length < 2) return undefined;
  const mx = points.reduce((s, p) => s + p[0], 0) / points.length;
  const my = points.reduce((s, p) => s + p[1], 0) / points.length;
  const sxx = points.reduce((s, p) => s + (p[0] - mx) ** 2, 0);
  return sxx > 0 ? points.reduce((s, p) => s + (p[0] - mx) * (p[1] - my), 0) / sxx : undefined;
}

export function hostsRun(delayMs: number, chat: TimedChat): HostsRun {
  const decode = (chat.at.length - 1) / ((chat.at[chat.at.length - 1] - chat.at[0]) / 1000);
  const steps = Math.max(1, ...chat.nodes.map((n) => n.steps));
  const engine = chat.nodes.reduce((s, n) => s + n.compute_ms, 0) / steps;
  // counted by the gateway (2 per node if replies climbed back up the route)
  const crossings = chat.crossings || 2 * chat.nodes.length;
  const budget = 1 / ((engine + crossings * delayMs) / 1000);
  return {
    delay_ms: delayMs,
    decode_tps: decode,
    ttft_ms: chat.ttftMs,
    engine_ms_per_token: engine,
    crossings,
    budget_tps: budget,
    vs_budget: decode / budget,
    tokens: chat.at.length,
  };
}

export async function benchHosts(
  o: {
    model: string;
    split: readonly LayerRange[];
    threads: number;
    delays: readonly number[];
    newTokens: number;
    /** also run llama.cpp RPC across hosts at these delays (its prompt: this many tokens) */
    rpc?: { readonly modelPath: string; readonly promptTokens: number };
  },
): Promise<HostsReport> {
  const net = await startHostNetwork({ model: o.model, split: o.split, threads: o.threads, delayMs: 0 });
  let runs: HostsRun[] = [];
  const hosts = net.hosts.map((h) => ({ name: h.name, ip: h.ip }));
  try {
    await timedChat(net.gateway, "Hello", 4); // warm-up
    for (const d of o.delays) {
      await net.setDelay(d);
      runs.push(hostsRun(d, await timedChat(net.gateway, "Tell me about the ocean.", o.newTokens)));
    }
  } finally {
    await net.stop();
  }
  if (o.rpc) {
    const rpc = await rpcAcrossHosts({
      modelPath: o.rpc.modelPath,
      split: o.split,
      threads: o.threads,
      delays: o.delays,
      promptTokens: o.rpc.promptTokens,
      decodeTokens: o.newTokens,
    });
    runs = runs.map((r) => {
      const x = rpc.find((x) => x.delay_ms === r.delay_ms);
      return x ? { ...r, rpc_decode_tps: x.decode_tps, route_vs_rpc: r.decode_tps / x.decode_tps } : r;
    });
  }
  const route = slope(runs.map((r) => [r.delay_ms, 1000 / r.decode_tps]));
  const rpc = slope(
    runs.flatMap((r) => r.rpc_decode_tps ? [[r.delay_ms, 1000 / r.rpc_decode_tps] as const] : []),
  );
  return {
    split: o.split.map(formatRange).join(","),
    hosts,
    runs,
    delay_slope_route: route,
    delay_slope_rpc: rpc,
    delay_slope_route_vs_rpc: route !== undefined && rpc ? route / rpc : undefined,
    delay_20_vs_budget: runs.find((r) => r.delay_ms === 20)?.vs_budget,
    delay_5_route_vs_rpc: runs.find((r) => r.delay_ms === 5)?.route_vs_rpc,
  };
}
