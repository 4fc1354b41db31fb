// `strata node --layers auto`: three nodes whose memory caps hold about half of SmolLM2 each
// ask the tracker where to go. They cover every layer, a route through them gives the whole
// model's greedy tokens, and when a node dies mid-stream the one that doubled a range moves
// into the hole (loading its new range before it drops the old): the stream's repair waits for
// it and goes on, and the route works again.
import { defaultModelPath } from "../../server/model/fetch.ts";
import { artifactSha256 } from "../../server/model/hash.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { localTracker, routeTokens, trackedNode } from "../../checks/hosts/tracked.ts";
import { streamChat } from "../../checks/parity/chat-client.ts";

const PROMPT = Int32Array.of(1, 504, 3575, 282, 253);
const STEPS = 8;
const dir = await Deno.makeTempDir({ prefix: "strata-place-" });
const token = crypto.randomUUID();
const model = defaultModelPath();
const artifact = await artifactSha256(model);

// whole-model greedy on the same engine kind: the reference a route must equal
async function wholeGreedy(): Promise<number[]> {
  const e = await NativeEngine.load({
    modelPath: model,
    range: "whole",
    kvCells: 64,
    maxSequences: 1,
    batchTokens: 64,
    threads: 1,
  });
  try {
    const seq = e.openSequence();
    const out: number[] = [];
    let tokens = PROMPT;
    let pos = 0;
    for (let i = 0; i < STEPS; i++) {
      const outputs = new Uint8Array(tokens.length);
      outputs[tokens.length - 1] = 1;
      const r = await e.decode({
        tokens,
        seq: new Int32Array(tokens.length).fill(seq),
        pos: Int32Array.from({ length: tokens.length }, (_, j) => pos + j),
        outputs,
      });
      pos += tokens.length;
      let best = 0;
      for (let v = 1; v < r.dim; v++) if (r.data[v] > r.data[best]) best = v;
      out.push(best);
      tokens = Int32Array.of(best);
    }
    return out;
  } finally {
    await e.close();
  }
}
const want = await wholeGreedy();

const tracker = await localTracker(dir, token, ["--lease-ms", "2000", "--spot-check-ms", "0"]);
const url = String(tracker.ready.url);
const t = trackerClient(url);
const nodes = new Map<string, ServiceProcess>();
const CAP = "90MB";
const start = async (name: string) =>
  nodes.set(
    name,
    await trackedNode(name, url, token, [
      "--layers",
      "auto",
      "--memory-cap",
      CAP,
      "--kv-cells",
      "1024",
      "--max-sessions",
      "4",
      "--batch-tokens",
      "64",
      "--session-idle-ms",
      "60000",
    ]),
  );

const live = async () =>
  (await t.client.nodes({}, { timeoutMs: 5000 })).nodes
    .filter((n) => n.live && n.admission === "admitted")
    .map((n) => ({ node: n.node, layers: `${n.shard!.range!.start}:${n.shard!.range!.end}` }))
    .sort((a, b) => a.node.localeCompare(b.node));

const covered = (xs: Array<{ layers: string }>) => {
  const c = new Uint8Array(30);
  for (const x of xs) {
    const [a, b] = x.layers.split(":").map(Number);
    c.fill(1, a, b);
  }
  return c.every((v) => v === 1);
};

async function until<T>(f: () => Promise<T>, ok: (v: T) => boolean, ms = 90_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
}

const routed = () => routeTokens(url, artifact, PROMPT, STEPS);

const report: Record<string, unknown> = { want };
try {
  // one at a time, so the plan is the same on every machine
  for (const n of ["a", "b", "c"]) await start(n);
  const first = await until(live, (xs) => xs.length === 3);
  report.first = first;
  report.firstCovered = covered(first);
  report.firstRoute = await routed();
  // a gateway on this tracker: a chat answered with every node up is the reference
  const gateway = await ServiceProcess.start("gateway", [
    "gateway",
    "--model",
    model,
    "--tracker",
    url,
    "--listen",
    "127.0.0.1:0",
    "--repair-deadline-ms",
    "60000",
  ]);
  try {
    const gw = String(gateway.ready.url);
    const id = (await (await fetch(`${gw}/v1/models`)).json()).data[0].id;
    const ask = {
      model: id,
      messages: [{ role: "user", content: "List three prime numbers." }],
      max_tokens: 48,
    };
    const reference = await streamChat(gw, {}, { ...ask, temperature: 0 });
    // the node whose range c does not double dies mid-stream (every route runs through it):
    // the stream's repair waits while c moves into the hole and loads it, then goes on
    const c = first.find((x) => x.node === "c")!;
    const victim = first.find((x) => x.node !== "c" && x.layers !== c.layers)!;
    report.victim = victim;
    let killedAt = 0;
    const cut = await streamChat(gw, {}, { ...ask, temperature: 0 }, () => {
      if (killedAt) return;
      killedAt = performance.now();
      nodes.get(victim.node)!.kill();
    });
    nodes.delete(victim.node);
    report.repaired = {
      same: cut.text === reference.text,
      chars: cut.text.length,
      error: cut.error ?? null,
      done: cut.done,
      repairs: cut.repairs,
      ms: Math.round(performance.now() - killedAt),
    };
  } finally {
    await gateway.stop();
  }
  const after = await until(live, (xs) => xs.length === 2 && covered(xs));
  report.after = after;
  report.afterCovered = covered(after);
  report.afterRoute = await routed();
} finally {
  t.close();
  for (const n of nodes.values()) await n.stop();
  await tracker.stop();
  await Deno.remove(dir, { recursive: true });
}
console.log(JSON.stringify(report));
