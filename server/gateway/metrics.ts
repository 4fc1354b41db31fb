// Gateway metrics in Prometheus text format.
import type { NodeShare } from "../../src/gateway/telemetry.ts";

type Labels = Record<string, string>;

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

  generation(
    route: string,
    prompt: number,
    completion: number,
    ttftMs: number | null,
    nodes: NodeShare[],
  ): void {
    this.add("strata_route_requests_total", "generations per route", { route });
    this.add("strata_prompt_tokens_total", "prompt tokens", {}, prompt);
    this.add("strata_completion_tokens_total", "generated tokens", {}, completion);
    if (ttftMs !== null) {
      this.add("strata_ttft_seconds_sum", "time to first token, sum", {}, ttftMs / 1000);
      this.add("strata_ttft_seconds_count", "time to first token, count", {});
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

  text(): string {
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
    return lines.join("\n") + "\n";
  }
}
