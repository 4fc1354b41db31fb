// Repair from a KV snapshot against repair by replay, side by side: `strata up` with two routes,
// its gateway mirroring prompts' KV to the other route's nodes (--kv-mirror) or not. A streamed
// chat behind a long prompt loses the node of its route's last range once its first text is out
// (and, mirroring, once both standbys hold their snapshot). Per lane: the time from the failure
// to the next token, and the positions × layers computed again. Prints figures; asserts nothing
// (kv-snapshot.test.ts checks the answer).
import { ServiceProcess } from "../../server/process/service-process.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { type ChatMessages } from "../parity/chat-reference.ts";
import { streamChat, type Streamed } from "../parity/chat-client.ts";
import { synthLlama1GB } from "../samples/synth-model.ts";
import { longSystemPrompt } from "./prefix-reuse.ts";

interface UpNode {
  readonly name: string;
  readonly url: string;
  readonly pid: number;
}

export interface LossRun {
  readonly answer: Streamed;
  /** the node killed */
  readonly victim: string;
  /** nodes that sent a snapshot, and the standbys that took one */
  readonly sent: string[];
  readonly mirrored: Array<{ node: string; entries: number; cells: number }>;
  /** from the first text to both standbys holding their snapshot */
  readonly mirrorMs?: number;
}

/**
 * A streamed chat through `net` (strata up, two routes of two nodes): once its first text is out,
 * and with `mirror` once both standbys took their snapshot, the node of the route's last range is
 * killed. The answer goes on through the repair.
 */
export async function chatThroughALoss(
  net: ServiceProcess,
  key: string,
  body: Record<string, unknown>,
  mirror: boolean,
): Promise<LossRun> {
  const nodes = net.ready.nodes as UpNode[];
  const grpc = new GrpcSeams();
  let killed: Promise<void> | undefined;
  const run: { victim?: string; sent: string[]; mirrored: LossRun["mirrored"]; mirrorMs?: number } = {
    sent: [],
    mirrored: [],
  };
  const killWhenReady = async () => {
    const t0 = performance.now();
    for (let k = 0; k < 600; k++) {
      const all = await Promise.all(nodes.map(async (n) => ({ n, i: await grpc.info(n.url) })));
      const standbys = all.filter(({ i }) => i.sessions === 0 && (i.prefix?.snapshotsTaken ?? 0n) > 0n);
      // a sender counts its snapshot once the receiver's answer is back, a moment after the receiver
      // counted it: both sides are waited for
      const senders = all.filter(({ i }) => (i.prefix?.snapshotsSent ?? 0n) > 0n);
      if (!mirror || (standbys.length === 2 && senders.length === 2)) {
        if (mirror) run.mirrorMs = performance.now() - t0;
        const last = all.find(({ i }) => i.sessions > 0 && i.range?.start !== 0);
        if (!last) throw new Error("the chat ended before a node could be killed");
        run.victim = last.n.name;
        run.mirrored = standbys.map(({ n, i }) => ({
          node: n.name,
          entries: i.prefix?.entries ?? 0,
          cells: i.prefix?.cells ?? 0,
        }));
        run.sent = senders.map(({ n }) => n.name);
        Deno.kill(last.n.pid, "SIGKILL");
        return;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error("no standby took a snapshot within 30 s");
  };
  try {
    const answer = await streamChat(
      String(net.ready.gateway),
      { authorization: `Bearer ${key}` },
      { ...body, stream: true },
      () => void (killed ??= killWhenReady()),
      AbortSignal.timeout(600_000),
    );
    await killed;
    return { answer, victim: run.victim!, sent: run.sent, mirrored: run.mirrored, mirrorMs: run.mirrorMs };
  } finally {
    grpc.close();
  }
}

export interface SnapshotRepairOptions {
  /** prompt tokens, about */
  readonly promptTokens: number;
  readonly maxTokens: number;
  /** a model path (default: the 1 GB synthetic llama) */
  readonly model?: string;
}

const KEY = "bench-key";

/** Words of the long system prompt that make about `tokens` prompt tokens on the gateway. */
async function wordsFor(gateway: string, tokens: number): Promise<number> {
  const count = async (words: number) => {
    const r = await fetch(`${gateway}/tokenize`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ content: longSystemPrompt(words) }),
    });
    return ((await r.json()).tokens as number[]).length;
  };
  const per = (await count(400)) / 400;
  return Math.round(tokens / per);
}

export async function benchSnapshotRepair(o: SnapshotRepairOptions, say: (s: string) => void) {
  const model = o.model ?? await synthLlama1GB();
  const lanes = [];
  let words: number | undefined;
  for (const lane of ["snapshot", "replay"] as const) {
    say(`${lane}: strata up`);
    const net = await ServiceProcess.start(
      "strata up",
      [
        "up",
        "--model",
        model,
        "--nodes",
        "2",
        "--routes",
        "2",
        "--port",
        "0",
        "--api-key",
        KEY,
        ...(lane === "snapshot" ? ["--kv-mirror", "256"] : []),
      ],
      {},
      900_000,
    );
    try {
      words ??= await wordsFor(String(net.ready.gateway), o.promptTokens);
      const messages: ChatMessages = [
        { role: "system", content: longSystemPrompt(words) },
        { role: "user", content: "Repeat every rule above, one per line." },
      ];
      say(`${lane}: a chat of ~${o.promptTokens} prompt tokens loses a node`);
      const run = await chatThroughALoss(
        net,
        KEY,
        { model: String(net.ready.model), messages, temperature: 0, max_tokens: o.maxTokens },
        lane === "snapshot",
      );
      const r = run.answer.repairs[0];
      lanes.push({
        lane,
        status: run.answer.status,
        error: run.answer.error?.message,
        victim: run.victim,
        mirror_ms: run.mirrorMs,
        mirrored: run.mirrored,
        repair: r,
        text: run.answer.text,
      });
      say(JSON.stringify(lanes[lanes.length - 1].repair ?? { error: run.answer.error }));
    } finally {
      await net.stop();
    }
  }
  return { model, prompt_tokens: o.promptTokens, lanes };
}

export function printSnapshotRepair(r: Awaited<ReturnType<typeof benchSnapshotRepair>>): string {
  const rows = r.lanes.map((l) => {
    const x = l.repair;
    if (!x) return `${l.lane.padEnd(9)} no repair (${l.status} ${l.error ?? ""})`;
    return `${l.lane.padEnd(9)} ${x.kind.padEnd(11)} ${x.ms.toFixed(0).padStart(7)} ms  (route ${
      x.route_ms.toFixed(0)
    }, open ${x.open_ms.toFixed(0)})  from snapshot ${
      String(x.snapshot_positions).padStart(5)
    }  computed again ${
      String(x.replayed_positions).padStart(5)
    } positions × ${x.layers_rebuilt} layers = ${x.layer_positions_rebuilt}`;
  });
  const [snap, replay] = r.lanes.map((l) => l.repair);
  const ratio = snap && replay
    ? ` — failure to next token ${(replay.ms / snap.ms).toFixed(2)}× faster from the snapshot`
    : "";
  return [
    `repair of a lost hop, ${
      r.model.split("/").pop()
    }, ~${r.prompt_tokens} prompt tokens, strata up (2 routes of 2)${ratio}`,
    "",
    "lane      kind        failure → next token              positions",
    ...rows,
    `same text: ${r.lanes.length === 2 && r.lanes[0].text === r.lanes[1].text}`,
    ...r.lanes.filter((l) => l.mirror_ms !== undefined).map((l) =>
      `mirroring took ${l.mirror_ms!.toFixed(0)} ms after the first token; standbys: ${
        l.mirrored.map((m) => `${m.node} ${m.cells} cells`).join(", ")
      }`
    ),
  ].join("\n");
}
