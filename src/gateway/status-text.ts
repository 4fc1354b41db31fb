// `strata status` as an operator reads it: the network's nodes (layers, engine, memory under
// the cap, speed), the coverage of the model's layers, free session slots and the routes in use,
// from the gateway's state API and its /health.
import { coverage, type NetworkState, runs } from "./network-view.ts";

export interface GatewayHealth {
  readonly ok: boolean;
  readonly reason?: string;
  readonly free_sessions?: number;
  readonly context_length?: number;
  readonly nodes_admitted?: number;
}

const sessions = (n: number) => `${n} session${n === 1 ? "" : "s"}`;
const mb = (b: number) => b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(1)} GiB` : `${Math.round(b / 2 ** 20)} MiB`;

export function statusText(state: NetworkState, health: GatewayHealth): string {
  const m = state.model;
  const lines = [
    `model ${m.name}: ${m.nLayer} layers, artifact ${m.artifact.slice(0, 12)}…`,
    health.ok
      ? `serving: ${health.free_sessions ?? 0} free session slots, context ${
        health.context_length ?? 0
      } tokens`
      : `not serving: ${health.reason ?? "no complete route"}`,
  ];
  const cover = runs(coverage(m.nLayer, state.nodes));
  const gaps = cover.filter((r) => r.hosts === 0).map((r) => `${r.start}:${r.end}`);
  lines.push(
    `coverage: ${cover.map((r) => `${r.start}:${r.end} ×${r.hosts}`).join(", ")}` +
      (gaps.length ? ` (gaps: ${gaps.join(", ")})` : ""),
  );
  lines.push(`nodes (${state.nodes.length}):`);
  const width = Math.max(4, ...state.nodes.map((n) => n.node.length));
  for (const n of [...state.nodes].sort((a, b) => a.start - b.start || a.node.localeCompare(b.node))) {
    const memory = n.capBytes > 0
      ? `${mb(n.needBytes)} of ${mb(n.capBytes)} cap`
      : `${mb(n.needBytes)}, no cap`;
    lines.push(
      `  ${n.node.padEnd(width)}  ${`${n.start}:${n.end}`.padEnd(7)} ${n.engine.padEnd(12)} ` +
        `${n.admission}${n.live ? "" : " (gone)"}  ${memory}  ${n.tokensPerS.toFixed(0)} tok/s  ${
          sessions(n.sessions)
        }`,
    );
  }
  const used = state.routes.filter((r) => r.sessions > 0);
  lines.push(
    `routes in use: ${
      used.length ? used.map((r) => `${r.name} (${sessions(r.sessions)})`).join(", ") : "none"
    }`,
  );
  if (state.routeKey) lines.push(`route key: ${state.routeKey.slice(0, 16)}…`);
  return lines.join("\n");
}
