// Generation Telemetry: what one request cost, attributed to the nodes of its route.
import type { NodeTelemetry } from "../gen/strata/seam/v1/seam_pb.ts";
import type { RepairRecord } from "./repair.ts";

export interface NodeShare {
  node: string;
  layers: string;
  steps: number;
  queue_ms: number;
  compute_ms: number;
  bytes_in: number;
  bytes_out: number;
  codec_ms: number;
  /** over the node's steps: the sessions, and the graph passes, of the engine call that carried
   *  each (divided by steps: sessions per call, and passes per call, as this request saw them) */
  batch_sessions: number;
  graph_passes: number;
  /** what the node sent its steps on: "tcp" (the fast seam), "tls" (the same over TLS), "grpc",
   *  "grpcs" (over TLS) or "relay" */
  transport: string;
}

export class GenerationTelemetry {
  readonly #nodes = new Map<string, NodeShare>();
  readonly #t0 = performance.now();
  #firstToken?: number;
  #lastToken?: number;
  #decodeSteps = 0;
  readonly #repairs: RepairRecord[] = [];
  /** seam crossings of the last decode step (hops + 1 when the last shard replies straight here) */
  #crossings = 0;

  /** prompt tokens the route's shards held already, and which nodes held them */
  #prefix = { tokens_reused: 0, nodes: [] as string[] };

  constructor(readonly route: string) {}

  /** The route started from its shards' prefix entries: `tokens` of the prompt, held by `nodes`. */
  reusedPrefix(tokens: number, nodes: readonly string[]): void {
    this.#prefix = { tokens_reused: tokens, nodes: tokens > 0 ? [...nodes] : [] };
  }

  /** The route lost a node and another took over (its first token has come). */
  repaired(r: RepairRecord): void {
    this.#repairs.push(r);
  }

  /** One reply from the route: the first is the prompt's, the others are decode steps. */
  step(telemetry: readonly NodeTelemetry[], crossings = 0): void {
    const now = performance.now();
    if (this.#firstToken === undefined) this.#firstToken = now;
    else this.#decodeSteps++;
    this.#lastToken = now;
    this.#crossings = crossings;
    for (const t of telemetry) {
      const s = this.#nodes.get(t.node) ??
        {
          node: t.node,
          layers: `${t.range?.start}:${t.range?.end}`,
          steps: 0,
          queue_ms: 0,
          compute_ms: 0,
          bytes_in: 0,
          bytes_out: 0,
          codec_ms: 0,
          batch_sessions: 0,
          graph_passes: 0,
          transport: "",
        };
      s.steps++;
      s.queue_ms += t.queueMs;
      s.compute_ms += t.computeMs + t.sampleMs;
      s.bytes_in += t.bytesIn;
      s.bytes_out += t.bytesOut;
      s.codec_ms += t.codecMs;
      s.batch_sessions += t.batchSessions;
      // a node that does not count passes (an older one) ran its batch in one
      s.graph_passes += t.batchPasses || 1;
      s.transport = t.transport;
      this.#nodes.set(t.node, s);
    }
  }

  get ttftMs(): number | undefined {
    return this.#firstToken === undefined ? undefined : this.#firstToken - this.#t0;
  }

  summary() {
    const decodeS = this.#firstToken !== undefined && this.#lastToken !== undefined
      ? (this.#lastToken - this.#firstToken) / 1000
      : 0;
    return {
      route: this.route,
      ttft_ms: this.ttftMs ?? null,
      decode_tokens_per_s: decodeS > 0 ? this.#decodeSteps / decodeS : null,
      total_ms: performance.now() - this.#t0,
      repairs: [...this.#repairs],
      prefix: this.#prefix,
      crossings_per_step: this.#crossings,
      // last shard first, as replies travel back
      nodes: [...this.#nodes.values()].sort((a, b) =>
        a.layers.localeCompare(b.layers, undefined, { numeric: true })
      ),
    };
  }
}
