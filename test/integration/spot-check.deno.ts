// Spot checks: two honest nodes and two that pass admission and lie afterwards (one before
// the last layer, checked through the tracker posing as its next shard; one last, checked by
// its sampled token and margin). The liars leave; the honest nodes stay through every check.
import { ServiceProcess } from "../../server/process/service-process.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { localTracker, trackedNode } from "../../checks/hosts/tracked.ts";

const dir = await Deno.makeTempDir({ prefix: "strata-spot-" });
const token = crypto.randomUUID();
const tracker = await localTracker(dir, token, ["--spot-check-ms", "250"]);
const url = String(tracker.ready.url);
const procs: ServiceProcess[] = [tracker];
const node = async (name: string, layers: string, fault?: string) =>
  procs.push(
    await trackedNode(name, url, token, ["--layers", layers, ...(fault ? ["--inject-fault", fault] : [])]),
  );

const t = trackerClient(url);
const states = async () =>
  Object.fromEntries((await t.client.nodes({}, { timeoutMs: 5000 })).nodes.map((n) => [n.node, n.admission]));
const report: Record<string, unknown> = {};
try {
  await Promise.all([
    node("honest-first", "0:12"),
    node("honest-last", "12:30"),
    node("late-first", "0:12", "scale-later"),
    node("late-last", "12:30", "scale-later"),
  ]);
  // every one passes its admission probe first
  const admitted = new Set<string>();
  const seen: Record<string, string[]> = {};
  const t0 = Date.now();
  for (;;) {
    const s = await states();
    for (const [n, a] of Object.entries(s)) {
      if (a === "admitted") admitted.add(n);
      if (seen[n]?.at(-1) !== a) (seen[n] ??= []).push(a);
    }
    const liarsOut = ["late-first", "late-last"].every((n) => s[n]?.startsWith("refused"));
    if (liarsOut || Date.now() - t0 > 90_000) {
      report.final = s;
      break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  report.seen = seen;
  report.admittedFirst = [...admitted].sort();
  report.ms = Date.now() - t0;
} finally {
  t.close();
  await Promise.all(procs.reverse().map((p) => p.stop()));
  await Deno.remove(dir, { recursive: true });
}
console.log(JSON.stringify(report));
