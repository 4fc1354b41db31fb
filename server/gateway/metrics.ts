// Gateway metrics in Prometheus text format.
import type { GenerationTelemetry } from "../../src/gateway/telemetry.ts";
import type { QueueStats } from "../../src/gateway/request-queue.ts";

type Labels = Record<string, string>;
type GenerationSummary = ReturnType<GenerationTelemetry["summary"]>;

const key = (name: string, labels: Labels) =>
  `${name}{${Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, "_")}"`).join(",")}}`;

export class Metrics {
  readonly #values = new Map<string, number>();
  readonly #help = new Map<string, string>();

  add(name: string, help: string, labels: Labels, by = 1): void {
    this.#help.set(name, help);
    const k = key(name, labels);
    this.#values.set(k, (this.#values.get(k) ?? 0) + by);
  }

  request(kind: string, status: number): void {
    this.add("strata_requests_total", "requests by endpoint and HTTP status", {
      endpoint: kind,
      status: String(status),
    });
  }

  generation(g: GenerationSummary, prompt: number, completion: number): void {
    const { route, ttft_ms: ttftMs, nodes } = g;
    this.add("strata_route_requests_total", "generations per route", { route });
    this.add("strata_prompt_tokens_total", "prompt tokens", {}, prompt);
    this.add("strata_completion_tokens_total", "generated tokens", {}, completion);
    this.add(
      "strata_prompt_tokens_cached_total",
      "prompt tokens the route's shards held already",
      {},
      g.prefix.tokens_reused,
    );
    for (const node of g.prefix.nodes) {
      this.add("strata_node_prefix_hits_total", "sessions that started from a node's prefix entry", { node });
      this.add(
        "strata_node_prefix_tokens_reused_total",
        "prompt positions a node took from its prefix entries",
        { node },
        g.prefix.tokens_reused,
      );
    }
    if (ttftMs !== null) {
      this.add("strata_ttft_seconds_sum", "time to first token, sum", {}, ttftMs / 1000);
      this.add("strata_ttft_seconds_count", "time to first token, count", {});
    }
    for (const r of g.repairs) {
      for (const node of r.nodes.length ? r.nodes : ["unknown"]) {
        this.add("strata_repairs_total", "routes repaired, by the node blamed and how", {
          node,
          kind: r.kind,
        });
      }
      this.add(
        "strata_repair_seconds_sum",
        "from a route's failure to the new route's first token, sum",
        {},
        r.ms / 1000,
      );
      this.add("strata_repair_seconds_count", "repairs timed", {});
      this.add(
        "strata_repair_replayed_positions_total",
        "positions prefilled again by repairs",
        {},
        r.replayed_positions,
      );
      this.add(
        "strata_repair_snapshot_positions_total",
        "positions repairs took from KV snapshots instead of computing them again",
        {},
        r.snapshot_positions,
      );
      this.add(
        "strata_repair_layer_positions_total",
        "the work repairs redid: positions computed again times the layers they crossed",
        {},
        r.layer_positions_rebuilt,
      );
    }
    for (const n of nodes) {
      const l = { node: n.node, layers: n.layers };
      this.add("strata_node_compute_seconds_total", "engine time per node", l, n.compute_ms / 1000);
      this.add(
        "strata_node_queue_seconds_total",
        "time steps waited for a batch, per node",
        l,
        n.queue_ms / 1000,
      );
      this.add("strata_node_steps_total", "steps per node", l, n.steps);
      this.add(
        "strata_node_batch_sessions_total",
        "per node, the sessions of the engine call that carried each step, summed (/ steps: sessions per call)",
        l,
        n.batch_sessions,
      );
      this.add(
        "strata_node_graph_passes_total",
        "per node, the graph passes of the engine call that carried each step, summed (/ steps: passes per call)",
        l,
        n.graph_passes,
      );
      this.add(
        "strata_node_seam_bytes_total",
        "activation bytes per node",
        { ...l, direction: "in" },
        n.bytes_in,
      );
      this.add(
        "strata_node_seam_bytes_total",
        "activation bytes per node",
        { ...l, direction: "out" },
        n.bytes_out,
      );
    }
  }

  /** Everything counted, and the request queue as it stands now. */
  text(queue?: QueueStats): string {
    const lines: string[] = [];
    const seen = new Set<string>();
    for (const [k, v] of [...this.#values].sort()) {
      const name = k.slice(0, k.indexOf("{"));
      if (!seen.has(name)) {
        seen.add(name);
        lines.push(
          `# HELP ${name} ${this.#help.get(name)}`,
          `# TYPE ${name} ${name.endsWith("_total") ? "counter" : "gauge"}`,
        );
      }
      lines.push(`${k.replace("{}", "")} ${v}`);
    }
    if (queue) lines.push(...queueLines(queue));
    return lines.join("\n") + "\n";
  }
}

/** The request queue: depth now, totals, and how long admitted requests waited. */
export function queueLines(q: QueueStats): string[] {
  const family = (
    name: string,
    type: string,
    help: string,
  ) => [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`];
  return [
    ...family("strata_queue_depth", "gauge", "requests waiting for a busy route now"),
    `strata_queue_depth ${q.waiting}`,
    ...family("strata_queue_requests_total", "counter", "requests that waited for a busy route"),
    `strata_queue_requests_total ${q.queued}`,
    ...family("strata_queue_refused_total", "counter", "requests refused with 429, by reason"),
    `strata_queue_refused_total{reason="queue_full"} ${q.refused.queue_full}`,
    `strata_queue_refused_total{reason="timeout"} ${q.refused.timeout}`,
    ...family("strata_queue_left_total", "counter", "waiting requests whose client went away"),
    `strata_queue_left_total ${q.left}`,
    ...family(
      "strata_queue_wait_seconds",
      "summary",
      "time admitted requests waited (quantiles over the last 1024)",
    ),
    `strata_queue_wait_seconds{quantile="0.5"} ${q.wait.p50Ms / 1000}`,
    `strata_queue_wait_seconds{quantile="0.95"} ${q.wait.p95Ms / 1000}`,
    `strata_queue_wait_seconds_sum ${q.wait.sumMs / 1000}`,
    `strata_queue_wait_seconds_count ${q.wait.count}`,
  ];
}
