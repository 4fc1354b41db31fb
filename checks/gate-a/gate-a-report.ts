// Gate A's report as Markdown: the lanes side by side, the ratios, and what they say about the
// gate's question.
import type { benchGateA } from "./gate-a.ts";

type Report = Awaited<ReturnType<typeof benchGateA>> & { signature: { public_key: string } };

const f = (x: number | undefined, d = 1) => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(d));

export function gateAMarkdown(r: Report): string {
  const rows = r.lanes.map((l) =>
    `| ${l.lane} | ${l.runs_on} | ${l.artifact} ${f(l.artifact_mb)} MB | ${f(l.ttft_ms)} | ${
      f(l.prefill_tps)
    } | ${f(l.decode_tps)} | ${f(l.p50_ms, 2)} / ${f(l.p95_ms, 2)} | ${f(l.rss_mb)} | ${
      f(l.drift.kl_mean, 4)
    } | ${f(100 * l.drift.top1_agreement, 2)} % |`
  );
  return [
    `# Gate A: ${r.model} on this machine`,
    "",
    `${r.machine.cores} cores, ${r.machine.threads_per_engine_process} thread(s) in every engine process and in PyTorch; ` +
    `prompt ${r.prompt_tokens} tokens, ${r.decode_tokens} greedy decode steps; drift over ${r.text.tokens} tokens of ` +
    `${r.text.source}, against the F32 Transformers lane. ${f(r.seconds, 0)} s in all.`,
    "",
    "| lane | runs on | artifact | TTFT ms | prefill tok/s | decode tok/s | p50 / p95 ms | RSS MB | mean KL | top-1 agreement |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
    "",
    ...Object.entries(r.ratios).map(([k, v]) => `- ${k}: ${f(v, 3)}`),
    `- the route's greedy token at every position equals the Q4_1 whole model's: ${r.route_tokens_same_as_whole_q4_1}`,
    "",
    `Signed (Ed25519) by ${r.signature.public_key}; check with \`./strata bench verify gate-a.json\`.`,
    "",
  ].join("\n");
}
