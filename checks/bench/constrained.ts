// What constrained decoding costs as users feel it: `strata up` (a route of 2), N requests at
// once (greedy, non-streamed), plain chat against response_format json_schema and against tools
// (the generic format's grammar). Per request: decode tok/s from the response's telemetry, and
// the last node's compute per step (its engine call plus sampling, where the grammar's mask
// runs). Prints figures; asserts nothing.
import { ServiceProcess } from "../../server/process/service-process.ts";
import { PERSON_SCHEMA, WEATHER_TOOL } from "../samples/schemas.ts";

const KINDS = {
  plain: { messages: [{ role: "user", content: "Describe a person in a few sentences." }] },
  json_schema: {
    messages: [{ role: "user", content: "Describe a person, as JSON." }],
    response_format: {
      type: "json_schema",
      json_schema: { name: "person", schema: PERSON_SCHEMA, strict: true },
    },
  },
  tools: {
    messages: [{ role: "user", content: "What is the weather like in Paris today?" }],
    tools: [WEATHER_TOOL],
    tool_choice: "required",
    parallel_tool_calls: false,
  },
} as const;

export interface ConstrainedLevel {
  readonly kind: keyof typeof KINDS;
  readonly concurrent: number;
  readonly completion_tokens: number;
  readonly decode_tok_s_p50: number;
  /** the last node's compute per step (engine call + sampling), ms */
  readonly last_node_ms_per_step: number;
  readonly errors: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

export async function benchConstrained(
  o: { levels: number[]; maxTokens: number; progress: (s: string) => void },
) {
  const net = await ServiceProcess.start(
    "strata up",
    ["up", "--port", "0", "--lease-ms", "3000"],
    {},
    600_000,
  );
  const gw = String(net.ready.gateway);
  const out: ConstrainedLevel[] = [];
  try {
    for (const n of o.levels) {
      for (const kind of Object.keys(KINDS) as (keyof typeof KINDS)[]) {
        o.progress(`${kind}, ${n} at once`);
        const runs = await Promise.all(Array.from({ length: n }, async (_, i) => {
          const r = await fetch(`${gw}/v1/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              model: "smollm2",
              temperature: 0,
              seed: i,
              max_tokens: o.maxTokens,
              ...KINDS[kind],
            }),
          });
          return r.ok ? await r.json() : null;
        }));
        const ok = runs.filter((r) => r !== null);
        const lasts = ok.map((r) => r.strata.nodes.at(-1) as { steps: number; compute_ms: number });
        out.push({
          kind,
          concurrent: n,
          completion_tokens: ok.reduce((k, r) => k + r.usage.completion_tokens, 0),
          decode_tok_s_p50: median(ok.map((r) => r.strata.decode_tokens_per_s ?? NaN)),
          last_node_ms_per_step: lasts.reduce((a, l) => a + l.compute_ms, 0) /
            lasts.reduce((a, l) => a + l.steps, 0),
          errors: n - ok.length,
        });
      }
    }
  } finally {
    await net.stop();
  }
  return out;
}

export function printConstrained(levels: readonly ConstrainedLevel[]): string {
  return levels.map((l) =>
    `${l.kind.padEnd(11)} ×${String(l.concurrent).padStart(2)}: decode ${
      l.decode_tok_s_p50.toFixed(1)
    } tok/s a request (p50), ` +
    `last node ${l.last_node_ms_per_step.toFixed(1)} ms a step, ${l.completion_tokens} tokens` +
    (l.errors ? `, ${l.errors} errors` : "")
  ).join("\n");
}
