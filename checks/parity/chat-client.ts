// One streamed chat completion read to its end, as the end-to-end tests see it: the text,
// how it finished, the route and its per-node telemetry, an error event if one came.
import { sseData } from "../../src/gateway/sse.ts";
import type { NodeShare } from "../../src/gateway/telemetry.ts";
import type { RepairRecord } from "../../src/gateway/repair.ts";

export interface Streamed {
  status: number;
  text: string;
  finish: string | null;
  route: string;
  nodes: NodeShare[];
  error?: { code?: string; message: string };
  done: boolean;
  ms: number;
  firstTokenMs?: number;
  /** when each piece of text came (performance.now()) */
  pieceAt: number[];
  /** the routes that took over from one that lost a node */
  repairs: RepairRecord[];
}

/** `onToken` sees each piece as it arrives (a test may act mid-generation); `fetcher`: one that
 *  trusts an https:// gateway's CA. */
export async function streamChat(
  gateway: string,
  headers: Record<string, string>,
  body: Record<string, unknown>,
  onToken?: (text: string) => void,
  signal?: AbortSignal,
  fetcher: typeof fetch = fetch,
): Promise<Streamed> {
  const t0 = performance.now();
  const r = await fetcher(`${gateway}/v1/chat/completions`, {
    signal,
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const out: Streamed = {
    status: r.status,
    text: "",
    finish: null,
    route: "",
    nodes: [],
    done: false,
    ms: 0,
    pieceAt: [],
    repairs: [],
  };
  for await (const data of sseData(r.body!)) {
    if (data === "[DONE]") {
      out.done = true;
      continue;
    }
    const j = JSON.parse(data);
    if (j.error) out.error = j.error;
    const c = j.choices?.[0];
    if (c?.delta?.content) {
      out.firstTokenMs ??= performance.now() - t0;
      out.text += c.delta.content;
      out.pieceAt.push(performance.now());
      onToken?.(out.text);
    }
    if (c?.finish_reason) out.finish = c.finish_reason;
    if (j.strata) {
      out.route = j.strata.route;
      out.nodes = j.strata.nodes ?? [];
      out.repairs = j.strata.repairs ?? [];
    }
  }
  out.ms = performance.now() - t0;
  return out;
}
