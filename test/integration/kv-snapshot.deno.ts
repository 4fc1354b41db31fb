// Repair from a KV snapshot end to end: `strata up` (two routes of two native nodes, SmolLM2),
// its gateway mirroring prompts of 256 positions or more (--kv-mirror). A streamed chat behind a
// ~600-token prompt: once the route's shards have sent their KV to the other route's nodes, the
// route's last node is killed; the repair takes that range's standby, which joins from the
// snapshot and is rebuilt only past it. The answer is compared with whole-model llama.cpp's
// greedy text. Then the route's first node stops (SIGTERM) and hands its prefix entry to the other
// node of its range. Prints one JSON object; kv-snapshot.test.ts asserts on it.
import { defaultModelPath } from "../../server/model/fetch.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { longSystemPrompt } from "../../checks/bench/prefix-reuse.ts";
import { chatThroughALoss } from "../../checks/bench/snapshot-repair.ts";
import { type ChatMessages, chatReference } from "../../checks/parity/chat-reference.ts";

const KEY = "test-key";
const MAX = 160;
const model = defaultModelPath();
const messages: ChatMessages = [
  { role: "system", content: longSystemPrompt(420) },
  { role: "user", content: "Repeat every rule above, one per line, word for word." },
];

const net = await ServiceProcess.start(
  "strata up",
  ["up", "--port", "0", "--api-key", KEY, "--routes", "2", "--kv-mirror", "256"],
  {},
  600_000,
);
let report: Record<string, unknown>;
try {
  const run = await chatThroughALoss(
    net,
    KEY,
    { model: "smollm2", messages, temperature: 0, max_tokens: MAX },
    true,
  );
  // the gateway's /metrics: the repair's figures, and each node's entries and snapshots
  const metrics = await (await fetch(`${net.ready.gateway}/metrics`)).text();
  // the route's first node stops (SIGTERM): it hands its prefix entry to the other node of its range
  const nodes = net.ready.nodes as Array<{ name: string; url: string; pid: number; layers: string }>;
  const grpc = new GrpcSeams();
  const taken = async (n: { url: string }) => Number((await grpc.info(n.url)).prefix?.snapshotsTaken ?? 0n);
  const first = nodes.find((n) => n.layers.startsWith("0:") && run.sent.includes(n.name))!;
  const sibling = nodes.find((n) => n.layers === first.layers && n !== first)!;
  const before = await taken(sibling);
  Deno.kill(first.pid, "SIGTERM");
  let after = before;
  for (let i = 0; i < 100 && after === before; i++) {
    await new Promise((r) => setTimeout(r, 100));
    after = await taken(sibling);
  }
  grpc.close();
  const ref = await chatReference(model, [messages], MAX);
  const a = run.answer;
  report = {
    answer: {
      status: a.status,
      error: a.error,
      finish: a.finish,
      text: a.text,
      repairs: a.repairs,
      victim: run.victim,
    },
    sent: run.sent,
    mirrored: run.mirrored,
    handover: { from: first.name, to: sibling.name, before, after },
    metrics: metrics.split("\n").filter((l) =>
      /^strata_(node_snapshots|node_prefix_budget|repair_snapshot)/.test(l)
    ),
    reference: ref.texts[0],
    at: a.text === ref.texts[0] ? undefined : ref.divergence(0, a.text),
  };
} finally {
  await net.stop();
}
console.log(JSON.stringify(report));
