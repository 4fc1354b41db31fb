// One greedy chat streamed from a gateway and timed token by token, with the route's
// per-node telemetry from the last event.
import { sseData } from "../../src/gateway/sse.ts";
import type { NodeShare } from "../../src/gateway/telemetry.ts";

export interface TimedChat {
  readonly text: string;
  /** arrival time of every content event */
  readonly at: number[];
  readonly ttftMs: number;
  readonly nodes: NodeShare[];
  /** one-way seam crossings of a decode step, as the gateway counted them */
  readonly crossings: number;
}

export async function timedChat(
  gateway: string,
  question: string,
  newTokens: number,
  model = "smollm2",
): Promise<TimedChat> {
  const t0 = performance.now();
  const r = await fetch(`${gateway}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      stream: true,
      temperature: 0,
      max_tokens: newTokens,
      messages: [{ role: "user", content: question }],
    }),
  });
  if (r.status !== 200) throw new Error(`chat: HTTP ${r.status}: ${await r.text()}`);
  const at: number[] = [];
  let text = "";
  let nodes: NodeShare[] = [];
  let crossings = 0;
  for await (const data of sseData(r.body!)) {
    if (data === "[DONE]") continue;
    const j = JSON.parse(data);
    if (j.error) throw new Error(`${j.error.code}: ${j.error.message}`);
    const piece = j.choices?.[0]?.delta?.content;
    if (piece) {
      at.push(performance.now());
      text += piece;
    }
    if (j.strata) {
      nodes = j.strata.nodes;
      crossings = j.strata.crossings_per_step ?? 0;
    }
  }
  return { text, at, ttftMs: at[0] - t0, nodes, crossings };
}
