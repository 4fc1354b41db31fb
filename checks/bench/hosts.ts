// Decode tok/s across separate hosts (network namespaces) against the one-way delay of every
// link, beside what the network must cost at least: the engines' time and one delay per crossing.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { formatRange } from "../../src/engine/layer-range.ts";
import { startHostNetwork } from "../hosts/network.ts";
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
}

export interface HostsReport {
  readonly split: string;
  readonly hosts: { name: string; ip: string }[];
  readonly runs: HostsRun[];
  readonly delay_20_vs_budget?: number;
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
  },
): Promise<HostsReport> {
  const net = await startHostNetwork({ model: o.model, split: o.split, threads: o.threads, delayMs: 0 });
  try {
    await timedChat(net.gateway, "Hello", 4); // warm-up
    const runs: HostsRun[] = [];
    for (const d of o.delays) {
      await net.setDelay(d);
      runs.push(hostsRun(d, await timedChat(net.gateway, "Tell me about the ocean.", o.newTokens)));
    }
    return {
      split: o.split.map(formatRange).join(","),
      hosts: net.hosts.map((h) => ({ name: h.name, ip: h.ip })),
      runs,
      delay_20_vs_budget: runs.find((r) => r.delay_ms === 20)?.vs_budget,
    };
  } finally {
    await net.stop();
  }
}
