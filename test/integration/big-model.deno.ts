// A model bigger than any participant: a synthetic llama of 1 GB, certified range by range
// under 40 % of its size, served by `strata up --memory-cap` (40 % of the file) with one
// headless tab, one Deno WASM node and native nodes for the rest, all placed by the tracker
// (which reads the header and the signed reference, never a weight). Eight concurrent chats
// against whole-model llama.cpp on the same file in a separate process.
import { cacheDir } from "../../server/process/paths.ts";
import { synthLlama1GB } from "../../checks/samples/synth-model.ts";
import { sha256File } from "../../server/model/hash.ts";
import { checkManifest, shardPieces } from "../../src/artifact/pieces.ts";
import { peerToken } from "../../src/relay/token.ts";
import { Chromium } from "../../server/browser/chromium.ts";
import { openVolunteerTab } from "../../server/browser/volunteer-tab.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { chatReference, EIGHT_QUESTIONS } from "../../checks/parity/chat-reference.ts";
import { streamChat } from "../../checks/parity/chat-client.ts";

const SIZE = 1e9;
const CAP = Math.floor(0.4 * SIZE);
const MAX = 12;
const shots = Deno.env.get("SHOTS_DIR") ?? await Deno.makeTempDir({ prefix: "strata-shots-" });
Deno.mkdirSync(shots, { recursive: true });
const KEY = "big-key";
const NODE_TOKEN = crypto.randomUUID();
const RELAY_SECRET = crypto.randomUUID();
const strata = new URL("../../strata", import.meta.url).pathname;
const run = async (args: string[]) => {
  const o = await new Deno.Command(strata, { args, stdout: "piped", stderr: "inherit" }).output();
  if (o.code !== 0) throw new Error(`strata ${args.join(" ")}: exit ${o.code}`);
  return new TextDecoder().decode(o.stdout);
};

const t0 = performance.now();
const model = await synthLlama1GB();
const synthMs = performance.now() - t0;
const fileBytes = (await Deno.stat(model)).size;
const sha = await sha256File(model);
// the publisher's reference, never holding more than the cap (beside the model: the tracker finds it)
const certified = JSON.parse(
  (await run(["model", "certify", model, "--memory-cap", String(CAP), "--out", `${model}.strata-ref`]))
    .trim().split("\n").pop()!,
);

const questions = EIGHT_QUESTIONS;
const ref = await chatReference(model, questions, MAX);

const net = await ServiceProcess.start(
  "strata up",
  [
    "up",
    "--model",
    model,
    "--memory-cap",
    String(CAP),
    "--browser-shards",
    "1",
    "--wasm-shards",
    "1",
    "--kv-cells",
    "1024",
    "--max-sessions",
    "8",
    "--port",
    "0",
    "--api-key",
    KEY,
    // a suite runs other tests beside this one on two cores: leases a busy node still meets
    "--lease-ms",
    "15000",
  ],
  { STRATA_NODE_TOKEN: NODE_TOKEN, STRATA_RELAY_SECRET: RELAY_SECRET },
  900_000,
);
const report: Record<string, unknown> = { fileBytes, cap: CAP, synthMs, certified, reference: ref.texts };
try {
  const gw = String(net.ready.gateway);
  report.nodes = net.ready.nodes;
  report.tabs = net.ready.tabs;
  const tracker = trackerClient(String(net.ready.tracker));
  const states = (await tracker.client.nodes({}, { timeoutMs: 5000 })).nodes;
  report.members = states.map((n) => ({
    node: n.node,
    layers: `${n.shard!.range!.start}:${n.shard!.range!.end}`,
    engine: n.shard!.engine,
    capBytes: Number(n.shard!.memoryCapBytes),
    admission: n.admission,
  }));
  tracker.close();
  // the tracker process: what it ever held in memory (it never loads a weight)
  const trackerPid = await new Deno.Command("pgrep", { args: ["-f", `cli.ts tracker --model ${model}`] })
    .output();
  const pid = new TextDecoder().decode(trackerPid.stdout).trim().split("\n")[0];
  const status = await Deno.readTextFile(`/proc/${pid}/status`).catch(() => "");
  report.trackerPeakRssBytes = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;

  const auth = { authorization: `Bearer ${KEY}` };
  const modelId = (await (await fetch(`${gw}/v1/models`, { headers: auth })).json()).data[0].id;
  // the network page, in a real browser, while the chats run and when a node leaves
  const browser = await Chromium.launch();
  const page = await browser.page(`${gw}/network/`);
  const pageState = () =>
    page.evaluate(() => {
      const n =
        (globalThis as unknown as { strataNetwork: { state: unknown; changes: unknown } }).strataNetwork;
      return JSON.parse(JSON.stringify({ state: n.state, changes: n.changes }));
    }) as Promise<
      { state?: { routes: Array<{ name: string }> }; changes: Array<{ kind: string; node: string }> }
    >;
  let shotDuring = false;
  const watching = (async () => {
    // the moment routes are in use: every chat holds one
    for (let i = 0; i < 300 && !shotDuring; i++) {
      const s = await pageState();
      if ((s.state?.routes.length ?? 0) > 0) {
        await page.screenshot({ path: `${shots}/network-1gb-serving.png`, fullPage: true });
        shotDuring = true;
      } else await new Promise((r) => setTimeout(r, 200));
    }
  })();
  const chats = await Promise.all(questions.map((q) =>
    streamChat(gw, auth, {
      model: modelId,
      messages: [{ role: "user", content: q }],
      temperature: 0,
      max_tokens: MAX,
    })
  ));
  report.chats = chats.map((c, i) => ({
    text: c.text,
    exact: c.text === ref.texts[i],
    at: c.text === ref.texts[i] ? undefined : ref.divergence(i, c.text),
    status: c.status,
    error: c.error,
    done: c.done,
    route: c.route,
    nodes: c.nodes.map((n) => n.node),
  }));
  await watching;
  report.shotDuring = shotDuring;
  // a new tab (a browser of its own: nothing cached) for the first tab's range fetches its
  // pieces from the gateway and from that tab, through the relay
  const first = (net.ready.tabs as Array<{ name: string; layers: string }>)[0];
  const second = await openVolunteerTab(gw, { layers: first.layers, threads: 1, memoryCapBytes: CAP });
  try {
    const s = await second.contribute();
    report.secondTab = { name: s.name, layers: first.layers, from: first.name, download: s.download };
  } finally {
    await second.close();
  }
  // a native node joining by hand for that range, with the artifact's URL: it too fetches
  // from the tab, through the relay (its pieces cleared from this machine's store first)
  const artifactUrl = `${gw}/artifacts/${sha}`;
  const manifest = checkManifest(await (await fetch(`${artifactUrl}/manifest`)).json(), sha);
  const [a, b] = first.layers.split(":").map(Number);
  for (const p of shardPieces(manifest, a, b)) {
    await Deno.remove(cacheDir("pieces", p.sha256)).catch(() => {});
  }
  const late = await ServiceProcess.start(
    "node late",
    [
      "node",
      "--model",
      artifactUrl,
      "--layers",
      first.layers,
      "--name",
      "late",
      "--tracker",
      String(net.ready.tracker),
      "--node-token",
      NODE_TOKEN,
      "--listen",
      "127.0.0.1:0",
      "--relay",
      String(net.ready.relay),
      "--relay-token",
      await peerToken(RELAY_SECRET, "late"),
      "--memory-cap",
      String(CAP),
      "--kv-cells",
      "1024",
      "--threads",
      "1",
    ],
    {},
    300_000,
  );
  report.lateNode = { from: first.name, bytesBySource: late.ready.fetched_bytes_by_source };
  await late.stop();
  // a native node leaves: the page shows the gap and says who left
  const leaving = (net.ready.nodes as Array<{ name: string; pid: number }>).find((n) => n.name === "n0")!;
  Deno.kill(leaving.pid, "SIGTERM");
  let left = false;
  for (let i = 0; i < 150 && !left; i++) {
    await new Promise((r) => setTimeout(r, 200));
    left = (await pageState()).changes.some((c) => c.kind === "left" && c.node === leaving.name);
  }
  await page.screenshot({ path: `${shots}/network-1gb-node-left.png`, fullPage: true });
  report.pageSawLeave = left;
  report.pageText = await page.evaluate(() => document.getElementById("summary")!.textContent);
  report.pageChanges = (await pageState()).changes;
  await browser.close();
} finally {
  await net.stop(60_000);
}
console.log(JSON.stringify(report));
Deno.exit(0);
