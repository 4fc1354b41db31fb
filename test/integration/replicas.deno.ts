// Two tracker replicas on one real PostgreSQL (started here, removed after): a route of two
// SmolLM2 nodes that list both replicas (A first), a gateway that lists both (B first), so
// registrations, admissions and heartbeats cross between replicas. Then: A stopped in the
// middle of a chat (the nodes move to B), A back and B stopped (the gateway moves to A), and
// both stopped and started again (the database keeps the network). Placement asked of either
// replica follows the one plan of the replica that leads. Prints one JSON object;
// replicas.test.ts asserts on it.
import { startPostgres } from "../../server/toolchain/postgres.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { localTracker, nodeStates, trackedNode } from "../../checks/hosts/tracked.ts";
import { freePort } from "../../server/http/free-port.ts";
import { CHAT_QUESTIONS, chatReference } from "../../checks/parity/chat-reference.ts";
import { streamChat } from "../../checks/parity/chat-client.ts";
import { artifactSha256 } from "../../server/model/hash.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { parseMemorySize } from "../../src/engine/memory-cap.ts";

const MAX = 24;
const KEY = "replicas-key";
const token = crypto.randomUUID();
const [portA, portB] = [freePort(), freePort()];
const A = `http://127.0.0.1:${portA}`, B = `http://127.0.0.1:${portB}`;
const questions = CHAT_QUESTIONS.slice(0, 3);
const ref = await chatReference(defaultModelPath(), questions, MAX);
const pg = await startPostgres();

const replica = (port: number) =>
  localTracker(pg.dir, token, ["--lease-ms", "3000", "--sync-ms", "250"], {
    listen: `127.0.0.1:${port}`,
    db: pg.url,
  });

/** What one replica (alone, no failover) says of the nodes, or why it could not say. */
const states = (url: string) => nodeStates(url).catch((e) => (e as Error).message);

const servingOn = (s: Awaited<ReturnType<typeof states>>) =>
  typeof s !== "string" && s.length === 2 && s.every((n) => n.live && n.admission === "admitted");

async function until(url: string, ms = 90_000) {
  const end = Date.now() + ms;
  for (;;) {
    const s = await states(url);
    if (servingOn(s) || Date.now() > end) return s;
    await new Promise((r) => setTimeout(r, 200));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Asks one replica (alone) where a node with about half the model's room should go. */
const artifact = await artifactSha256(defaultModelPath());
async function placeAt(url: string, node: string): Promise<string> {
  const t = trackerClient(url);
  try {
    const r = await t.client.place({
      token,
      node,
      artifactSha256: artifact,
      memoryCapBytes: BigInt(parseMemorySize("90MB")),
      engine: "native-cpu",
      kvCells: 1024,
      maxSessions: 4,
      batchTokens: 64,
      batchInvariant: true,
      flashAttention: true,
    }, { timeoutMs: 20_000 });
    return `${r.range!.start}:${r.range!.end}`;
  } catch (e) {
    return (e as Error).message;
  } finally {
    t.close();
  }
}
const report: Record<string, unknown> = { reference: ref.texts };
let a = await replica(portA);
let b = await replica(portB);
const nodes = [];
let gateway: ServiceProcess | undefined;
try {
  // placement, on an empty network: one replica leads (A, up first). Two nodes with room for
  // about half the model ask different replicas where to go; B answers with A's plan, so the
  // second gets the other half (a replica placing alone would give it the first half again)
  report.placedOnA = await placeAt(A, "p1");
  report.placedOnB = await placeAt(B, "p2");
  for (const layers of ["0:12", "12:30"]) {
    nodes.push(await trackedNode(`n${layers.replace(":", "-")}`, `${A},${B}`, token, ["--layers", layers]));
  }
  gateway = await ServiceProcess.start("gateway", [
    "gateway",
    "--tracker",
    `${B},${A}`,
    "--listen",
    "127.0.0.1:0",
    "--api-key",
    KEY,
  ]);
  const gw = String(gateway.ready.url);
  const chat = (q: number, onToken?: () => void) =>
    streamChat(gw, { authorization: `Bearer ${KEY}` }, {
      model: "smollm2",
      messages: [{ role: "user", content: questions[q] }],
      temperature: 0,
      max_tokens: MAX,
    }, onToken);
  const answer = (r: Awaited<ReturnType<typeof chat>>) => ({
    status: r.status,
    text: r.text,
    error: r.error,
  });

  // the nodes registered with A; B learned them from the database
  report.onA = await until(A);
  report.onB = await until(B);
  report.first = answer(await chat(0));

  // A goes in the middle of a chat: the nodes beat B from then on
  let stopping: Promise<void> | undefined;
  let pieces = 0;
  const during = await chat(1, () => {
    if (++pieces === 4) stopping = a.stop();
  });
  await stopping;
  report.duringStopA = answer(during);
  // two leases later: no node lost, as B sees it
  await sleep(6000);
  report.bAfterAStopped = await states(B);
  report.afterStopA = answer(await chat(2));
  // B took the lead: an ask is answered without A
  report.placedOnBAlone = await placeAt(B, "p3");

  // A back, B gone: the gateway moves to A
  a = await replica(portA);
  report.aBack = await until(A);
  await b.stop();
  report.afterStopB = answer(await chat(0));
  await sleep(6000);
  report.aAfterBStopped = await states(A);

  // both replicas stopped and started again: the database still has the network
  await a.stop();
  a = await replica(portA);
  b = await replica(portB);
  report.restartedA = await states(A);
  report.restartedB = await states(B);
  report.servingAfterRestart = await until(B);
  report.afterRestart = answer(await chat(1));
} finally {
  await gateway?.stop();
  for (const n of nodes) await n.stop();
  await a.stop();
  await b.stop();
  await pg.stop();
}
console.log(JSON.stringify(report));
Deno.exit(0);
