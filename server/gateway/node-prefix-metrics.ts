// Each node's prefix entries and KV snapshots on the gateway's /metrics, read at scrape time from
// the live nodes the tracker lists with a direct URL (their NodeInfo, a second at most each; a node
// reached only through the relay is left out). Counts the gateway sees in responses (hits, tokens
// reused) are in metrics.ts.
import type { Client } from "@connectrpc/connect";
import type { PrefixInfo } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import type { GrpcSeams } from "../../node-apis/seam/grpc.ts";

/** Nodes asked at most per scrape: a large network's nodes report to their own collectors. */
const MOST_NODES = 64;

type Family = readonly [
  name: string,
  type: "gauge" | "counter",
  help: string,
  value: (p: PrefixInfo) => number,
];

const FAMILIES: readonly Family[] = [
  ["strata_node_prefix_entries", "gauge", "prefix entries a node holds", (p) => p.entries],
  ["strata_node_prefix_cells", "gauge", "KV cells a node's prefix entries hold", (p) => p.cells],
  [
    "strata_node_prefix_budget_cells",
    "gauge",
    "KV cells a node keeps for prefix entries at most",
    (p) => p.budgetCells,
  ],
  [
    "strata_node_prefix_evictions_total",
    "counter",
    "prefix entries a node let go",
    (p) => Number(p.evictions),
  ],
  ["strata_node_snapshots_sent_total", "counter", "KV snapshots a node sent", (p) => Number(p.snapshotsSent)],
  [
    "strata_node_snapshots_taken_total",
    "counter",
    "KV snapshots a node took in",
    (p) => Number(p.snapshotsTaken),
  ],
  [
    "strata_node_snapshots_refused_total",
    "counter",
    "KV snapshots a node refused",
    (p) => Number(p.snapshotsRefused),
  ],
];

/** The nodes' prefix figures, as Prometheus lines (none when no node could be asked). */
export async function nodePrefixLines(
  tracker: Client<typeof TrackerService>,
  seams: GrpcSeams,
): Promise<string[]> {
  const listed = await tracker.nodes({}, { timeoutMs: 1000 }).catch(() => undefined);
  const direct = (listed?.nodes ?? []).filter((n) => n.live).flatMap((n) => {
    const url = n.urls.find((u) => /^https?:\/\//.test(u));
    return url ? [{ node: n.node, url }] : [];
  }).slice(0, MOST_NODES);
  const infos = await Promise.all(direct.map(async (d) => {
    const i = await seams.info(d.url, 1000).catch(() => undefined);
    return i?.prefix ? [{ node: d.node, prefix: i.prefix }] : [];
  }));
  const got = infos.flat();
  if (got.length === 0) return [];
  return FAMILIES.flatMap(([name, type, help, value]) => [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} ${type}`,
    ...got.map((n) => `${name}{node="${n.node.replace(/["\\\n]/g, "_")}"} ${value(n.prefix)}`),
  ]);
}
