// Placement by measured speed beside an equal split. Two nodes, each capped to hold about
// four fifths of SmolLM2: a slow one (the WASM engine, one thread) and a fast one (native, two
// threads). Placed, they ask the tracker where to go (`--layers auto`); once both have
// measured their speed (at load, then on a session's traffic) and the plan has been quiet,
// the tracker moves work to the faster one. Equal, the same two hold 0:15 and 15:30. Decode tok/s of one greedy session through
// each route. Prints figures; asserts nothing.
import { formatRange, layerRange } from "../../src/engine/layer-range.ts";
import { RouteSession } from "../../src/route/route-session.ts";
import { artifactSha256 } from "../../server/model/hash.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { Dialer } from "../../node-apis/seam/dialer.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { localTracker, trackedNode } from "../hosts/tracked.ts";

const PROMPT = Int32Array.of(1, 9690, 28, 2683, 314, 260, 3575, 282, 4649, 47);
// with these settings SmolLM2 needs 134 MB whole; 110 MB holds 24 of its 30 layers, or 20
// and the output head (its logits' buffers too)
const SETTINGS = [
  "--memory-cap",
  "110MB",
  "--kv-cells",
  "1024",
  "--max-sessions",
  "4",
  "--batch-tokens",
  "64",
];
const SLOW = ["--engine", "wasm", "--threads", "1"];
const FAST = ["--threads", "2"];

interface Member {
  readonly node: string;
  readonly layers: string;
  readonly tokensPerS: number;
}

async function network(layers: { slow: string; fast: string }, waitForMove: boolean) {
  const dir = await Deno.makeTempDir({ prefix: "strata-bench-place-" });
  const token = crypto.randomUUID();
  const procs: ServiceProcess[] = [];
  const tracker = await localTracker(dir, token, ["--lease-ms", "3000", "--spot-check-ms", "0"]);
  procs.push(tracker);
  const url = String(tracker.ready.url);
  const t = trackerClient(url);
  const members = async (): Promise<Member[]> =>
    (await t.client.nodes({}, { timeoutMs: 5000 })).nodes
      .filter((n) => n.live && n.admission === "admitted")
      .map((n) => ({
        node: n.node,
        layers: `${n.shard!.range!.start}:${n.shard!.range!.end}`,
        tokensPerS: n.shard!.decodeTokensPerS,
      }))
      .sort((a, b) => a.layers.localeCompare(b.layers));
  try {
    for (const [name, engine] of [["slow", SLOW], ["fast", FAST]] as const) {
      procs.push(
        await trackedNode(name, url, token, ["--layers", layers[name], ...SETTINGS, ...engine]),
      );
    }
    const covered = (ms: Member[]) =>
      ms.length === 2 && new Set(ms.flatMap((m) => m.layers.split(":"))).has("30");
    let first: Member[] = [];
    for (let i = 0; i < 300 && !covered(first); i++) {
      await new Promise((r) => setTimeout(r, 200));
      first = await members();
    }
    // a session's traffic measures each node's rate again (at load they measured beside each
    // other's load); the tracker rebalances once both speeds are known and the plan has
    // been quiet 30 s
    if (waitForMove) await decode(t, 24);
    for (let i = 0; waitForMove && i < 600; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const now = await members();
      if (covered(now) && now.map((m) => m.layers).join() !== first.map((m) => m.layers).join()) break;
    }
    // a settled route: the moved node's new range admitted, the old one gone
    await new Promise((r) => setTimeout(r, 2000));
    // the median of three sessions: one alone varies by a tenth from run to run here
    const runs = [await decode(t), await decode(t), await decode(t)].sort((a, b) => a - b);
    return { first, last: await members(), decodeTokS: runs[1] };
  } finally {
    t.close();
    for (const p of procs.reverse()) await p.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Decode tok/s of one greedy session (after its first token) through the tracker's route. */
async function decode(t: ReturnType<typeof trackerClient>, steps = 48): Promise<number> {
  const artifact = await artifactSha256(defaultModelPath());
  const dialer = await Dialer.connect();
  try {
    const sessionId = crypto.randomUUID();
    const route =
      (await t.client.route({ artifactSha256: artifact, sessionId, count: 1 }, { timeoutMs: 5000 }))
        .routes[0];
    const s = await RouteSession.open(
      dialer.dial,
      route.hops.map((h) => ({ url: h.url, range: h.range!, ticket: h.routeTicket })),
      { sessionId, epoch: route.epoch, artifactSha256: artifact, kvCells: PROMPT.length + steps },
    );
    const at: number[] = [];
    for await (const _ of s.generate(PROMPT, steps, () => false)) at.push(performance.now());
    await s.release();
    return (at.length - 1) / ((at.at(-1)! - at[0]) / 1000);
  } finally {
    dialer.close();
  }
}

export async function benchPlacement() {
  const placed = await network({ slow: "auto", fast: "auto" }, true);
  const half = formatRange(layerRange(0, 15));
  const equal = await network({ slow: half, fast: formatRange(layerRange(15, 30)) }, false);
  return { placed, equal, ratio: placed.decodeTokS / equal.decodeTokS };
}

export function printPlacementBench(r: Awaited<ReturnType<typeof benchPlacement>>): string {
  const show = (ms: Member[]) =>
    ms.map((m) => `${m.node} ${m.layers} (${m.tokensPerS.toFixed(1)} tok/s alone)`).join(", ");
  return [
    `placed by the tracker: first ${show(r.placed.first)}; after measuring ${show(r.placed.last)}`,
    `equal layers:          ${show(r.equal.last)}`,
    `decode, one session:   placed ${r.placed.decodeTokS.toFixed(1)} tok/s, equal ${
      r.equal.decodeTokS.toFixed(1)
    } tok/s (${r.ratio.toFixed(2)}×)`,
  ].join("\n");
}
