// Prefix reuse end to end: `strata up` (one route of two native nodes) and, beside its gateway,
// a second gateway on the same nodes that prefills every prompt whole (--no-prefix-reuse): the
// cold answers. A conversation of three turns behind a shared system prompt, then eight users at
// once, two turns each, with a prefix budget small enough that entries are evicted and give way
// to live sessions. Every answer that reused a prefix is compared byte for byte with its cold
// answer, and the first conversation with whole-model llama.cpp's greedy text.
// Prints one JSON object; prefix.test.ts asserts on it.
import { defaultModelPath } from "../../server/model/fetch.ts";
import { upWithColdGateway } from "../../checks/bench/prefix-reuse.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { type ChatMessages, chatReference, EIGHT_QUESTIONS } from "../../checks/parity/chat-reference.ts";

const KEY = "test-key";
const MAX = 24;
const model = defaultModelPath();

/** About 330 tokens that every conversation starts with. */
const SYSTEM = [
  "You are the assistant of a small library in a mountain town.",
  "The library opens at nine in the morning and closes at six in the evening, except on Sundays, when it is closed.",
  "Members may borrow up to five books at a time, for three weeks, and may renew each loan twice.",
  "The reading room on the first floor is quiet; the children's corner on the ground floor is not.",
  "There are four computers for public use, bookable by the hour at the front desk.",
  "Late returns cost ten cents a day per book, and lost books are replaced at their listed price.",
  "The library holds a local history collection, maps of the valley since 1850, and old newspapers.",
  "A book club meets on the first Tuesday of each month; new members are always welcome.",
  "Answer briefly and kindly, in plain words, and say so when you do not know something.",
].join(" ").repeat(3);

// eight conversations at once fit the pool, but not beside a full prefix budget: entries give way
// to live sessions
const { net, cold, warmUrl, coldUrl } = await upWithColdGateway(KEY, [
  "--kv-cells",
  "8192",
  "--prefix-cells",
  "4096",
]);
const nodes = net.ready.nodes as Array<{ name: string; url: string }>;
const grpc = new GrpcSeams();

interface Answer {
  status: number;
  text: string;
  cached: number;
  prefix?: { tokens_reused: number; nodes: string[] };
  error?: string;
}

async function chat(gateway: string, messages: ChatMessages): Promise<Answer> {
  const r = await fetch(`${gateway}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "smollm2", messages, temperature: 0, max_tokens: MAX }),
    // an answer that never comes fails the test here rather than hanging it
    signal: AbortSignal.timeout(120_000),
  });
  const j = await r.json();
  return {
    status: r.status,
    text: j.choices?.[0]?.message?.content ?? "",
    cached: j.usage?.prompt_tokens_details?.cached_tokens ?? -1,
    prefix: j.strata?.prefix,
    error: j.error?.message,
  };
}

const prefixStats = async () =>
  Object.fromEntries(
    await Promise.all(nodes.map(async (n) => {
      const p = (await grpc.info(n.url)).prefix;
      return [
        n.name,
        p && {
          entries: p.entries,
          cells: p.cells,
          budget_cells: p.budgetCells,
          hits: Number(p.hits),
          tokens_reused: Number(p.tokensReused),
          evictions: Number(p.evictions),
        },
      ];
    })),
  );

/** A conversation's turns: each asked of the reusing gateway, then of the cold one. */
async function converse(questions: readonly string[]) {
  const history: { role: string; content: string }[] = [{ role: "system", content: SYSTEM }];
  const turns = [];
  for (const q of questions) {
    history.push({ role: "user", content: q });
    const asked = [...history];
    const warm = await chat(warmUrl, asked);
    const again = await chat(warmUrl, asked);
    const coldAnswer = await chat(coldUrl, asked);
    turns.push({ messages: asked, warm, again, cold: coldAnswer });
    history.push({ role: "assistant", content: warm.text });
  }
  return turns;
}

const report: Record<string, unknown> = {};
const say = (what: string) => console.error(`prefix test: ${what}`);
try {
  // 1. one conversation of three turns
  const turns = await converse(["What time does the library open?", "And on Sundays?", "How many books?"]);
  const ref = await chatReference(model, turns.map((t) => t.messages), MAX);
  report.conversation = turns.map((t, i) => ({
    warm: t.warm,
    again: t.again,
    cold: t.cold,
    reference: ref.texts[i],
    at: t.warm.text === ref.texts[i] ? undefined : ref.divergence(i, t.warm.text),
  }));
  report.after_conversation = await prefixStats();
  say("one conversation done");

  // 2. eight users at once, two turns each, then the same conversations on the cold gateway
  const firsts = EIGHT_QUESTIONS.map((
    q,
  ) => [{ role: "system", content: SYSTEM }, { role: "user", content: q }]);
  const warm1 = await Promise.all(firsts.map((m) => chat(warmUrl, m)));
  const seconds = firsts.map((m, i) => [
    ...m,
    { role: "assistant", content: warm1[i].text },
    { role: "user", content: "Thank you. Can you say that again in fewer words?" },
  ]);
  const warm2 = await Promise.all(seconds.map((m) => chat(warmUrl, m)));
  const cold1 = await Promise.all(firsts.map((m) => chat(coldUrl, m)));
  const cold2 = await Promise.all(seconds.map((m) => chat(coldUrl, m)));
  report.concurrent = {
    first: warm1.map((w, i) => ({ warm: w, cold: cold1[i] })),
    second: warm2.map((w, i) => ({ warm: w, cold: cold2[i] })),
  };
  report.after_concurrent = await prefixStats();
  say("eight conversations done");
} finally {
  grpc.close();
  await cold.stop();
  await net.stop();
}
console.log(JSON.stringify(report));
Deno.exit(0);
