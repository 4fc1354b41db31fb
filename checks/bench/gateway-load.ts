// Concurrency through the gateway as users feel it: `strata up --routes 2`, with batch-invariant
// nodes and without, N streamed greedy chats at once (N = 1, 8, 16, 64): aggregate tok/s,
// inter-token latency p50/p95 and TTFT p50/p95 (queue wait included). Then chunked prefill:
// 8 streams decoding when a ~2000-token prompt arrives, their inter-token gaps before it and
// while it is prefilled. Prints figures; asserts nothing.
import { ServiceProcess } from "../../server/process/service-process.ts";
import { timedChat } from "./timed-chat.ts";

const QUESTIONS = [
  "What is the capital of France?",
  "List three prime numbers.",
  "Hi!",
  "What is 12 times 7?",
];

export interface LoadLevel {
  readonly concurrent: number;
  readonly aggregate_tok_s: number;
  readonly itl_ms_p50: number;
  readonly itl_ms_p95: number;
  readonly ttft_ms_p50: number;
  readonly ttft_ms_p95: number;
  readonly errors: number;
}

export interface ChunkedPrefill {
  readonly prompt_tokens: number;
  readonly itl_ms_p50_before: number;
  readonly itl_ms_p95_before: number;
  readonly itl_ms_p50_during: number;
  readonly itl_ms_p95_during: number;
  readonly itl_ms_max_during: number;
  readonly long_prompt_ttft_ms: number;
}

export interface GatewayLoadRun {
  readonly batch_invariant: boolean;
  readonly levels: LoadLevel[];
  readonly chunked_prefill: ChunkedPrefill;
}

const q = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const gaps = (at: number[]) => at.slice(1).map((t, i) => t - at[i]);

async function level(gw: string, n: number, newTokens: number): Promise<LoadLevel> {
  const t0 = performance.now();
  const runs = await Promise.all(
    Array.from(
      { length: n },
      (_, i) => timedChat(gw, QUESTIONS[i % QUESTIONS.length], newTokens).catch(() => null),
    ),
  );
  const wall = (performance.now() - t0) / 1000;
  const ok = runs.filter((r) => r !== null);
  const tokens = ok.reduce((k, r) => k + r!.at.length, 0);
  return {
    concurrent: n,
    aggregate_tok_s: tokens / wall,
    itl_ms_p50: q(ok.flatMap((r) => gaps(r!.at)), 0.5),
    itl_ms_p95: q(ok.flatMap((r) => gaps(r!.at)), 0.95),
    ttft_ms_p50: q(ok.map((r) => r!.ttftMs), 0.5),
    ttft_ms_p95: q(ok.map((r) => r!.ttftMs), 0.95),
    errors: n - ok.length,
  };
}

async function chunkedPrefill(gw: string): Promise<ChunkedPrefill> {
  const streams = Array.from({ length: 8 }, (_, i) => timedChat(gw, QUESTIONS[i % 4], 160));
  await new Promise((r) => setTimeout(r, 1500));
  const long = "The quick brown fox jumps over the lazy dog while the farmer counts his sheep. ".repeat(110);
  const sent = performance.now();
  const l = await timedChat(gw, `${long}\nSummarize the text above in one word.`, 1);
  const firstToken = l.at[0] ?? performance.now();
  const runs = await Promise.all(streams);
  const all = runs.flatMap((r) => r.at.slice(1).map((t, i) => ({ t, gap: t - r.at[i] })));
  const before = all.filter((g) => g.t < sent).map((g) => g.gap);
  const during = all.filter((g) => g.t >= sent && g.t <= firstToken + 50).map((g) => g.gap);
  return {
    prompt_tokens: Math.round(long.length / 4.4),
    itl_ms_p50_before: q(before, 0.5),
    itl_ms_p95_before: q(before, 0.95),
    itl_ms_p50_during: q(during, 0.5),
    itl_ms_p95_during: q(during, 0.95),
    itl_ms_max_during: Math.max(...during),
    long_prompt_ttft_ms: l.ttftMs,
  };
}

export async function benchGatewayLoad(
  o: { levels: number[]; newTokens: number; routes: number; progress?: (s: string) => void },
): Promise<GatewayLoadRun[]> {
  const out: GatewayLoadRun[] = [];
  for (const invariant of [true, false]) {
    // 4096 cells a session: the 2000-token prompt fits one session's stream
    const net = await ServiceProcess.start(
      "strata up",
      [
        "up",
        "--port",
        "0",
        "--routes",
        String(o.routes),
        "--kv-cells",
        String(16 * 4096),
        "--queue-max",
        "256",
        ...(invariant ? [] : ["--no-batch-invariant"]),
      ],
      {},
      600_000,
    );
    try {
      const gw = String(net.ready.gateway);
      await level(gw, 2, 8); // warm-up
      const levels: LoadLevel[] = [];
      for (const n of o.levels) {
        o.progress?.(`batch-invariant ${invariant}: ${n} at once`);
        levels.push(await level(gw, n, o.newTokens));
      }
      o.progress?.(`batch-invariant ${invariant}: chunked prefill`);
      out.push({ batch_invariant: invariant, levels, chunked_prefill: await chunkedPrefill(gw) });
    } finally {
      await net.stop(30_000);
    }
  }
  return out;
}

export function printGatewayLoad(runs: GatewayLoadRun[]): string {
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "—");
  const lines = [
    "| batch-invariant | at once | aggregate tok/s | ITL p50 / p95 ms | TTFT p50 / p95 ms (queue included) | errors |",
    "| --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of runs) {
    for (const l of r.levels) {
      lines.push(
        `| ${r.batch_invariant ? "on" : "off"} | ${l.concurrent} | ${f(l.aggregate_tok_s)} | ${
          f(l.itl_ms_p50)
        } / ${f(l.itl_ms_p95)} | ${f(l.ttft_ms_p50)} / ${f(l.ttft_ms_p95)} | ${l.errors} |`,
      );
    }
  }
  lines.push("", "chunked prefill: 8 streams decoding when a long prompt arrives");
  for (const r of runs) {
    const c = r.chunked_prefill;
    lines.push(
      `  invariant ${r.batch_invariant ? "on " : "off"}: ~${c.prompt_tokens} tokens, ITL p50/p95 ${
        f(c.itl_ms_p50_before)
      }/${f(c.itl_ms_p95_before)} ms before, ${f(c.itl_ms_p50_during)}/${f(c.itl_ms_p95_during)} ms (max ${
        f(c.itl_ms_max_during)
      }) during its prefill; its TTFT ${f(c.long_prompt_ttft_ms)} ms`,
    );
  }
  return lines.join("\n");
}
