// The tracker keeps registrations, admissions and its route key across a restart; leases
// are re-learned from heartbeats, and routes work again without a new probe.
// Prints one JSON object; tracker.test.ts asserts on it.
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { artifactSha256 } from "../../server/model/hash.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { localTracker, nodeStates, routeTokens, trackedNode } from "../../checks/hosts/tracked.ts";
import { freePort } from "../../server/http/free-port.ts";

const dir = await Deno.makeTempDir();
const token = crypto.randomUUID();
// a fixed port, so the nodes find the tracker again after its restart
const port = freePort();
const url = `http://127.0.0.1:${port}`;
const startTracker = () => localTracker(dir, token, ["--lease-ms", "2000"], { listen: `127.0.0.1:${port}` });
const artifact = await artifactSha256(defaultModelPath());

const states = () => nodeStates(url);

async function until(what: (s: Awaited<ReturnType<typeof states>>) => boolean, ms = 60_000) {
  const end = Date.now() + ms;
  for (;;) {
    const s = await states();
    if (what(s) || Date.now() > end) return s;
    await new Promise((r) => setTimeout(r, 200));
  }
}

const routeName = () => routeTokens(url, artifact, Int32Array.of(1, 504, 3575), 2);

let tracker = await startTracker();
const nodes = [];
for (const layers of ["0:12", "12:30"]) {
  nodes.push(await trackedNode(`n${layers.replace(":", "-")}`, url, token, ["--layers", layers]));
}
const report: Record<string, unknown> = {};
try {
  report.before = await until((s) => s.filter((n) => n.admission === "admitted").length === 2);
  report.routeBefore = await routeName();
  await tracker.stop();
  tracker = await startTracker();
  // straight after the restart: the records are back, the leases are not (yet)
  report.afterRestart = await states();
  report.afterHeartbeats = await until((s) => s.every((n) => n.live));
  report.routeAfter = await routeName();
  // a wrong token is refused
  const t = trackerClient(url);
  try {
    await t.client.heartbeat({ token: "wrong", node: "x" });
    report.wrongToken = "accepted";
  } catch (e) {
    report.wrongToken = (e as Error).message;
  } finally {
    t.close();
  }
} finally {
  for (const n of nodes) await n.stop();
  await tracker.stop();
  await Deno.remove(dir, { recursive: true });
}
console.log(JSON.stringify(report));
Deno.exit(0);
