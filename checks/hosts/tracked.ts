// What the tests and benches that run a tracker share: starting one, starting a node that joins
// it, and a route it hands out, driven for a few greedy tokens.
import { defaultModelPath } from "../../server/model/fetch.ts";
import { ensureReference } from "../../server/model/reference-file.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { Dialer } from "../../node-apis/seam/dialer.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { RouteSession } from "../../src/route/route-session.ts";

/**
 * `strata tracker` for SmolLM2 on loopback (its reference certified once and cached), its state
 * in `dir` (or in `at.db`: another file, or a database replicas share), on a port of its own (or
 * `at.listen`, to come back on after a restart).
 */
export async function localTracker(
  dir: string,
  token: string,
  args: string[] = [],
  at: { listen?: string; db?: string } = {},
): Promise<ServiceProcess> {
  return ServiceProcess.start(`tracker ${at.listen ?? ""}`.trim(), [
    "tracker",
    "--reference",
    await ensureReference(defaultModelPath(), { backend: "cpu" }),
    "--listen",
    at.listen ?? "127.0.0.1:0",
    "--db",
    at.db ?? `${dir}/tracker.db`,
    "--node-token",
    token,
    ...args,
  ]);
}

/**
 * `strata node` on loopback, one engine thread, registered with the tracker at `url`; `args`
 * come last, so they may set the threads too.
 */
export function trackedNode(
  name: string,
  url: string,
  token: string,
  args: string[],
): Promise<ServiceProcess> {
  return ServiceProcess.start(name, [
    "node",
    "--name",
    name,
    "--threads",
    "1",
    "--tracker",
    url,
    "--node-token",
    token,
    "--listen",
    "127.0.0.1:0",
    ...args,
  ]);
}

/** What the tracker at `url` says of each node it knows, by name: live, and its admission. */
export async function nodeStates(url: string) {
  const t = trackerClient(url);
  try {
    return (await t.client.nodes({}, { timeoutMs: 5000 })).nodes.map((n) => ({
      node: n.node,
      live: n.live,
      admission: n.admission,
    })).sort((x, y) => x.node < y.node ? -1 : 1);
  } finally {
    t.close();
  }
}

/** A route from the tracker and `steps` greedy tokens through it (the nodes verify its tickets). */
export async function routeTokens(url: string, artifact: Uint8Array, prompt: Int32Array, steps: number) {
  const t = trackerClient(url);
  const dialer = await Dialer.connect();
  try {
    const sessionId = crypto.randomUUID();
    const r = await t.client.route({ artifactSha256: artifact, sessionId, count: 1 }, { timeoutMs: 5000 });
    const route = r.routes[0];
    const session = await RouteSession.open(
      dialer.dial,
      route.hops.map((h) => ({ url: h.url, range: h.range!, ticket: h.routeTicket })),
      { sessionId, epoch: route.epoch, artifactSha256: artifact, kvCells: prompt.length + steps },
    );
    const tokens: number[] = [];
    for await (const s of session.generate(prompt, steps, () => false)) tokens.push(s.token);
    await session.release();
    await t.client.done({ sessionId }, { timeoutMs: 5000 }).catch(() => {});
    return { name: route.name, epoch: route.epoch.toString(), tokens };
  } catch (e) {
    return { error: (e as Error).message, tokens: [] as number[] };
  } finally {
    dialer.close();
    t.close();
  }
}
