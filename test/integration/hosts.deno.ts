// Gate D: one real model across separate hosts. Relay, tracker, gateway and two shard nodes
// (SmolLM2 0:12, 12:30) each in a network namespace with its own address, every link behind
// a user-space delay (this kernel has no sch_netem). Chats from the harness equal whole-model
// llama.cpp's greedy text; then decode tok/s is measured at 0, 5, 20 and 50 ms one-way delay
// (figures, not assertions). Prints one JSON object; hosts.test.ts asserts on it.
import { layerRange } from "../../src/engine/layer-range.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { startHostNetwork } from "../../checks/hosts/network.ts";
import { hostsRun } from "../../checks/bench/hosts.ts";
import { timedChat } from "../../checks/bench/timed-chat.ts";
import { CHAT_QUESTIONS, chatReference } from "../../checks/parity/chat-reference.ts";

const MAX = 24;
const ref = await chatReference(defaultModelPath(), CHAT_QUESTIONS, MAX);
const net = await startHostNetwork({
  model: "smollm2",
  split: [layerRange(0, 12), layerRange(12, 30)],
  threads: 1,
  delayMs: 5,
});
const report: Record<string, unknown> = { hosts: net.hosts, gateway: net.gateway, tracker: net.tracker };
try {
  const chats = [];
  for (const [q, question] of CHAT_QUESTIONS.entries()) {
    const c = await timedChat(net.gateway, question, MAX);
    const exact = c.text === ref.texts[q];
    chats.push({
      q,
      text: c.text,
      exact,
      at: exact ? undefined : ref.divergence(q, c.text),
      nodes: c.nodes.map((n) => n.node),
    });
  }
  report.chats = chats;
  const runs = [];
  for (const d of [0, 5, 20, 50]) {
    await net.setDelay(d);
    runs.push(hostsRun(d, await timedChat(net.gateway, "Tell me about the ocean.", 32)));
  }
  report.runs = runs;
} finally {
  await net.stop();
}
console.log(JSON.stringify(report));
Deno.exit(0);
