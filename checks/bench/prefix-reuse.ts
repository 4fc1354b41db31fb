// Prefix reuse through `strata up` (a route of two native nodes): its gateway reuses prefixes,
// a second gateway on the same nodes prefills every prompt whole (--no-prefix-reuse). Lanes in
// turns, on one machine:
// - one conversation of N turns behind a long system prompt: each turn's TTFT with reuse and
//   without, and the prompt tokens computed;
// - U users at once, T turns each, the same system prompt: the hit rate, TTFT p50/p95 with and
//   without, and what the nodes keep against their budget.
// Prints figures; asserts nothing (the suite's prefix.test.ts checks the answers are the same).
import { ServiceProcess } from "../../server/process/service-process.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { quantile } from "./route-throughput.ts";

export interface PrefixBenchOptions {
  /** words of the system prompt (about 1.3 tokens each) */
  readonly systemWords: number;
  readonly turns: number;
  readonly users: number;
  readonly userTurns: number;
  readonly maxTokens: number;
}

const KEY = "bench-key";

/** A system prompt of about `words` words: a library's rules, numbered, none the same. */
export function longSystemPrompt(words: number): string {
  const rules: string[] = [];
  for (let i = 1; rules.join(" ").split(" ").length < words; i++) {
    rules.push(
      `Rule ${i}: members may keep up to ${(i % 7) + 2} books from shelf ${i * 3} for ${
        (i % 4) + 1
      } weeks, ` +
        `and the reading room ${i % 2 ? "upstairs" : "downstairs"} closes at ${(i % 5) + 5} pm on day ${
          i % 7
        }.`,
    );
  }
  return `You are the librarian's assistant. Answer briefly. ${rules.join(" ")}`;
}

interface Turn {
  readonly ttftMs: number;
  readonly promptTokens: number;
  readonly cached: number;
  readonly text: string;
}

async function chat(gateway: string, messages: unknown[], maxTokens: number): Promise<Turn> {
  const r = await fetch(`${gateway}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "smollm2", messages, temperature: 0, max_tokens: maxTokens }),
    signal: AbortSignal.timeout(600_000),
  });
  const j = await r.json();
  if (!r.ok) throw new Error(`${r.status}: ${j?.error?.message}`);
  return {
    ttftMs: j.strata.ttft_ms,
    promptTokens: j.usage.prompt_tokens,
    cached: j.usage.prompt_tokens_details.cached_tokens,
    text: j.choices[0].message.content,
  };
}

const QUESTIONS = [
  "How many books may I keep from shelf 3?",
  "When does the reading room close on day 2?",
  "Which floor is the reading room on for rule 4?",
  "Can I renew a loan?",
  "What does rule 9 say?",
  "Summarize rule 12.",
  "Is shelf 30 for children?",
  "How long may I keep books from shelf 15?",
  "Thank you. Anything else I should know?",
  "Goodbye!",
];

/** One user's conversation on `gateway`: each turn's figures. */
async function converse(gateway: string, system: string, turns: number, maxTokens: number, salt = 0) {
  const history: { role: string; content: string }[] = [{ role: "system", content: system }];
  const out: Turn[] = [];
  for (let t = 0; t < turns; t++) {
    history.push({ role: "user", content: QUESTIONS[(t + salt) % QUESTIONS.length] });
    const r = await chat(gateway, history, maxTokens);
    out.push(r);
    history.push({ role: "assistant", content: r.text });
  }
  return out;
}

/**
 * `strata up` with `upArgs` and the API key `key`, and beside its gateway a second one on the same
 * nodes that prefills every prompt whole: the cold answers.
 */
export async function upWithColdGateway(key: string, upArgs: readonly string[]) {
  const net = await ServiceProcess.start(
    "strata up",
    ["up", "--port", "0", "--api-key", key, ...upArgs],
    {},
    600_000,
  );
  try {
    const cold = await ServiceProcess.start("cold gateway", [
      "gateway",
      "--tracker",
      String(net.ready.tracker),
      "--listen",
      "127.0.0.1:0",
      "--api-key",
      key,
      "--no-prefix-reuse",
    ]);
    return { net, cold, warmUrl: String(net.ready.gateway), coldUrl: String(cold.ready.url) };
  } catch (e) {
    await net.stop();
    throw e;
  }
}

export async function benchPrefixReuse(o: PrefixBenchOptions, say: (s: string) => void) {
  const system = longSystemPrompt(o.systemWords);
  // room for every user's live session beside an entry each
  const { net, cold, warmUrl: warm, coldUrl } = await upWithColdGateway(KEY, [
    "--max-sessions",
    String(2 * o.users),
    "--kv-cells",
    "65536",
  ]);
  const nodes = net.ready.nodes as Array<{ name: string; url: string; pid: number }>;
  const grpc = new GrpcSeams();
  try {
    // lane 1: one conversation, each turn with reuse then without (the same history)
    say(`one conversation of ${o.turns} turns`);
    const history: { role: string; content: string }[] = [{ role: "system", content: system }];
    const conversation = [];
    for (let t = 0; t < o.turns; t++) {
      history.push({ role: "user", content: QUESTIONS[t % QUESTIONS.length] });
      const w = await chat(warm, history, o.maxTokens);
      const c = await chat(coldUrl, history, o.maxTokens);
      conversation.push({
        turn: t + 1,
        prompt_tokens: w.promptTokens,
        ttft_ms_reuse: w.ttftMs,
        ttft_ms_cold: c.ttftMs,
        computed_reuse: w.promptTokens - w.cached,
        computed_cold: c.promptTokens - c.cached,
        same_text: w.text === c.text,
      });
      history.push({ role: "assistant", content: w.text });
      // each turn's figures as they come: a long run stopped early keeps what it measured
      say(JSON.stringify(conversation[t]));
    }

    // lane 2: users at once, with reuse, then the same without
    say(`${o.users} users at once, ${o.userTurns} turns each`);
    const many = async (gateway: string) => (await Promise.all(
      Array.from({ length: o.users }, (_, u) => converse(gateway, system, o.userTurns, o.maxTokens, u)),
    ));
    const t0 = performance.now();
    const warmRuns = await many(warm);
    const warmS = (performance.now() - t0) / 1000;
    say(`with reuse: ${warmS.toFixed(1)} s`);
    const afterWarm = await Promise.all(nodes.map(async (n) => {
      const i = await grpc.info(n.url);
      return {
        node: n.name,
        kv_cells: i.kvCells,
        kv_cells_used: i.kvCellsUsed,
        prefix_entries: i.prefix?.entries ?? 0,
        prefix_cells: i.prefix?.cells ?? 0,
        prefix_budget_cells: i.prefix?.budgetCells ?? 0,
        evictions: Number(i.prefix?.evictions ?? 0),
        rss_mb: rssMb(n.pid),
      };
    }));
    const t1 = performance.now();
    const coldRuns = await many(coldUrl);
    const coldS = (performance.now() - t1) / 1000;
    const flat = (runs: Turn[][]) => runs.flat();
    const w = flat(warmRuns), c = flat(coldRuns);
    const ttft = (xs: Turn[]) => {
      const ms = xs.map((x) => x.ttftMs).sort((a, b) => a - b);
      return { p50: quantile(ms, 0.5), p95: quantile(ms, 0.95) };
    };
    const users = {
      users: o.users,
      turns_each: o.userTurns,
      hit_rate: w.filter((x) => x.cached > 0).length / w.length,
      prompt_tokens: w.reduce((n, x) => n + x.promptTokens, 0),
      tokens_reused: w.reduce((n, x) => n + x.cached, 0),
      ttft_ms_reuse: ttft(w),
      ttft_ms_cold: ttft(c),
      wall_s_reuse: warmS,
      wall_s_cold: coldS,
      same_text: w.filter((x, i) => x.text === c[i].text).length,
      answers: w.length,
      nodes: afterWarm,
    };
    return { system_prompt_tokens: conversation[0]?.prompt_tokens, conversation, users };
  } finally {
    grpc.close();
    await cold.stop();
    await net.stop();
  }
}

function rssMb(pid: number): number {
  try {
    const kb = Number(/VmHWM:\s+(\d+)/.exec(Deno.readTextFileSync(`/proc/${pid}/status`))?.[1] ?? 0);
    return Math.round(kb / 1024);
  } catch {
    return 0;
  }
}

export function printPrefixReuse(r: Awaited<ReturnType<typeof benchPrefixReuse>>): string {
  const lines = [
    `prefix reuse, strata up (route of 2), system prompt ~${r.system_prompt_tokens} tokens with the first question`,
    "",
    "turn  prompt  TTFT reuse  TTFT cold  computed reuse / cold  same text",
    ...r.conversation.map((t) =>
      `${String(t.turn).padStart(4)}  ${String(t.prompt_tokens).padStart(6)}  ${
        t.ttft_ms_reuse.toFixed(0).padStart(8)
      } ms  ${t.ttft_ms_cold.toFixed(0).padStart(6)} ms  ${String(t.computed_reuse).padStart(8)} / ${
        String(t.computed_cold).padEnd(8)
      }  ${t.same_text}`
    ),
    "",
    `${r.users.users} users × ${r.users.turns_each} turns: hit rate ${
      (100 * r.users.hit_rate).toFixed(0)
    } %, ` +
    `${r.users.tokens_reused} of ${r.users.prompt_tokens} prompt tokens reused; ` +
    `${r.users.same_text} of ${r.users.answers} answers the same as cold`,
    `TTFT p50/p95: reuse ${r.users.ttft_ms_reuse.p50.toFixed(0)}/${
      r.users.ttft_ms_reuse.p95.toFixed(0)
    } ms, ` +
    `cold ${r.users.ttft_ms_cold.p50.toFixed(0)}/${r.users.ttft_ms_cold.p95.toFixed(0)} ms; wall ` +
    `${r.users.wall_s_reuse.toFixed(1)} s vs ${r.users.wall_s_cold.toFixed(1)} s`,
    ...r.users.nodes.map((n) =>
      `  ${n.node}: ${n.prefix_entries} entries, ${n.prefix_cells} of ${n.prefix_budget_cells} budget cells ` +
      `(${n.kv_cells_used} of ${n.kv_cells} KV cells in use), ${n.evictions} evictions, peak RSS ${n.rss_mb} MB`
    ),
  ];
  return lines.join("\n");
}
