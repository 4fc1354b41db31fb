// `strata up --memory-cap SIZE`: a network no member of which holds the model. Every
// participant is capped and asks the tracker where to go: the headless tabs first, then the
// Deno WASM nodes, then native nodes, one at a time, until every layer is covered.
import { fileFacts } from "../model/facts.ts";
import { resolveModel } from "../model/fetch.ts";
import { ServiceProcess } from "../process/service-process.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { gaps, type Span } from "../../src/tracker/placement/placement.ts";
import { openVolunteerTab, type VolunteerTab } from "../browser/volunteer-tab.ts";
import { nodeTuningArgs, trackedNodeArgs } from "./node-args.ts";
import {
  gatewayProcess,
  type NodeProc,
  pagesOf,
  type UpOptions,
  type UpPlane,
  waitAdmitted,
} from "./plane.ts";
import type { KeepUp } from "./keep-up.ts";

/** More native nodes than this and the cap is too small for the model. */
const MAX_NATIVE = 32;

export async function placedNetwork(
  o: UpOptions,
  at: UpPlane,
  started: ServiceProcess[],
  tabs: VolunteerTab[],
  say: (what: string) => void,
  keep: KeepUp,
): Promise<{ gateway: string; nodes: NodeProc[] }> {
  const { capBytes, tabs: nTabs, wasm } = o.placed!;
  const gateway = await gatewayProcess(o, at, "auto");
  started.push(gateway);
  const gatewayUrl = String(gateway.ready.url);
  keep.watch(gateway, gatewayUrl, (listen) => gatewayProcess({ ...o, gatewayListen: listen }, at, "auto"));
  say(`gateway  ${gatewayUrl} (pages: ${pagesOf(gatewayUrl)})`);
  let members = 0;
  for (let i = 0; i < nTabs; i++) {
    // one Chromium for all of them
    const tab = await openVolunteerTab(gatewayUrl, {
      threads: o.threads,
      memoryCapBytes: capBytes,
      chromium: tabs[0]?.chromium,
      // a --tls network's tabs trust its CA, as its volunteers would add it
      trustCa: o.tlsDir ? `${o.tlsDir}/ca.pem` : undefined,
    });
    tabs.push(tab);
    const s = await tab.contribute();
    const r = s.assignment!.range;
    say(`tab      ${s.name} layers ${r.start}:${r.end} (${s.engine})`);
    await waitAdmitted(at.trackerUrl, ++members);
  }
  const nodes: NodeProc[] = [];
  const join = async (name: string, engine: "wasm" | "native") => {
    const node = await trackedNodeArgs({
      model: o.model,
      range: "auto",
      name,
      tracker: at.trackerUrl,
      nodeToken: at.nodeToken,
      listen: `${o.listenHost ?? "127.0.0.1"}:0`,
      relay: at.relayUrl,
      relaySecret: at.relaySecret,
      threads: o.threads,
      tls: at.tls,
    });
    const p = await ServiceProcess.start(`node ${name}`, [
      ...node.args,
      "--memory-cap",
      String(capBytes),
      ...(engine === "wasm" ? ["--engine", "wasm"] : ["--backend", o.backend]),
      ...nodeTuningArgs(o),
      "--serve-artifact",
      `${o.listenHost ?? "127.0.0.1"}:0`,
    ], node.env);
    started.push(p);
    const url = (p.ready.urls as string[])[0];
    const layers = String(p.ready.layers);
    nodes.push({ name, layers, route: 0, url, process: p });
    say(`node     ${name} layers ${layers}${engine === "wasm" ? " (WASM)" : ""} at ${url}`);
    await waitAdmitted(at.trackerUrl, ++members);
  };
  for (let i = 0; i < wasm; i++) await join(`w${i}`, "wasm");
  const { nLayer } = await fileFacts((await resolveModel(o.model)).path);
  for (let i = 0;; i++) {
    const before = await uncovered(at.trackerUrl, nLayer);
    if (before.layers === 0) break;
    if (i === MAX_NATIVE) throw new Error(`${MAX_NATIVE} native nodes under the cap do not cover the model`);
    await join(`n${i}`, "native");
    // a node that covered nothing new was placed beside others: what is left fits no one
    if ((await uncovered(at.trackerUrl, nLayer)).layers === before.layers) {
      throw new Error(
        `layers ${before.spans.map((g) => `${g.start}:${g.end}`).join(", ")} fit no node under ${
          (capBytes / 2 ** 20).toFixed(0)
        } MiB ` +
          `with these engine settings (the output head and its logits buffer grow with --batch-tokens and the vocabulary)`,
      );
    }
  }
  return { gateway: gatewayUrl, nodes };
}

/** The layers no live, admitted node holds, and how many they are. */
async function uncovered(trackerUrl: string, nLayer: number): Promise<{ spans: Span[]; layers: number }> {
  const t = trackerClient(trackerUrl);
  try {
    const { nodes } = await t.client.nodes({}, { timeoutMs: 5000 });
    const held = nodes.filter((n) => n.live && n.admission === "admitted" && n.shard?.range)
      .map((n) => ({ start: n.shard!.range!.start, end: n.shard!.range!.end }));
    const spans = gaps(nLayer, held);
    return { spans, layers: spans.reduce((k, s) => k + s.end - s.start, 0) };
  } finally {
    t.close();
  }
}
