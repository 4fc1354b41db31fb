// The `strata node` command line of a node that joins a tracker and a relay: what `strata up`
// and the test-host network start, each adding its own options. Its secrets (the node token,
// its relay token) go in its environment, never in argv, where `ps` would show them.
import { formatRange, type LayerRange } from "../../src/engine/layer-range.ts";
import { peerToken } from "../../src/relay/token.ts";
import { type NetworkTls, tlsArgs } from "./network-tls.ts";

export async function trackedNodeArgs(o: {
  model: string;
  /** the range, or "auto": the tracker places the node */
  range: LayerRange | "auto";
  name: string;
  tracker: string;
  nodeToken: string;
  /** where it serves seams; none: it is reachable through the relay only */
  listen?: string;
  relay: string;
  relaySecret: string;
  threads: number;
  /** the network's TLS files: the node serves TLS with a certificate from the tracker */
  tls?: NetworkTls;
}): Promise<{ args: string[]; env: Record<string, string> }> {
  const args = [
    "node",
    "--model",
    o.model,
    "--layers",
    o.range === "auto" ? "auto" : formatRange(o.range),
    "--name",
    o.name,
    "--tracker",
    o.tracker,
    ...(o.listen ? ["--listen", o.listen] : []),
    "--relay",
    o.relay,
    "--threads",
    String(o.threads),
    // an idle session is released after this long
    "--session-idle-ms",
    "600000",
    ...tlsArgs(o.tls, "node"),
  ];
  return {
    args,
    env: { STRATA_NODE_TOKEN: o.nodeToken, STRATA_RELAY_TOKEN: await peerToken(o.relaySecret, o.name) },
  };
}
export interface NodeTuning {
  readonly maxSessions?: number;
  readonly kvCells?: number;
  readonly ctxSize?: number;
  readonly unusedSessionMs?: number;
  /** KV cells each node keeps as prefix entries (0: none; default: the node's) */
  readonly prefixCells?: number;
}

export const nodeTuningArgs = (o: NodeTuning): string[] => [
  ...(o.maxSessions ? ["--max-sessions", String(o.maxSessions)] : []),
  ...(o.kvCells ? ["--kv-cells", String(o.kvCells)] : []),
  ...(o.ctxSize ? ["--ctx-size", String(o.ctxSize)] : []),
  ...(o.unusedSessionMs ? ["--unused-session-ms", String(o.unusedSessionMs)] : []),
  ...(o.prefixCells !== undefined ? ["--prefix-cells", String(o.prefixCells)] : []),
];
