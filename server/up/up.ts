// `strata up`: a whole local network — relay, tracker, routes of native shard nodes and a
// gateway — each in its own process; ready once every node is admitted.
import { formatRange, type LayerRange } from "../../src/engine/layer-range.ts";
import { peerToken } from "../../src/relay/token.ts";
import { resolveModel } from "../model/fetch.ts";
import { ensureReference } from "../model/reference-file.ts";
import { ServiceProcess } from "../process/service-process.ts";
import { openVolunteerTab, type VolunteerTab } from "../browser/volunteer-tab.ts";
import { nodeTuningArgs, trackedNodeArgs } from "./node-args.ts";
import { placedNetwork } from "./placed.ts";
import { gatewayProcess, type NodeProc, pagesOf, type UpOptions, waitAdmitted } from "./plane.ts";
import { KeepUp } from "./keep-up.ts";
import { makeNetworkTls, tlsArgs } from "./network-tls.ts";
import { hostPort } from "../cli/options.ts";

export interface Network {
  readonly gateway: string;
  readonly tracker: string;
  /** the tracker's or gateway's process now (each is started again if it dies) */
  pid(service: "tracker" | "gateway"): number;
  readonly relay: string;
  readonly nodes: NodeProc[];
  /** the browser shard's tab, when asked for (the first, with several) */
  readonly browser?: VolunteerTab;
  readonly tabs: VolunteerTab[];
  stop(): Promise<void>;
}

export async function up(o: UpOptions): Promise<Network> {
  const say = o.progress ?? (() => {});
  const host = o.listenHost ?? "127.0.0.1";
  const nodeToken = o.nodeToken ?? crypto.randomUUID();
  // set it to let more nodes join through this network's relay by hand
  const relaySecret = o.relaySecret ?? crypto.randomUUID();
  const started: ServiceProcess[] = [];
  let browser: VolunteerTab | undefined;
  const tabs: VolunteerTab[] = [];
  const keep = new KeepUp(started, say);
  const stop = async () => {
    keep.stop();
    // the tabs first (they leave the tracker), the edge, the nodes (together: each ends on its
    // own, and one by one they would outlast a parent's grace period), then the control plane
    for (const t of [...tabs].reverse()) await t.close();
    await browser?.close();
    const later = [...started].reverse();
    const nodes = later.filter((p) => p.label.startsWith("node "));
    for (const p of later.filter((p) => p.label === "gateway")) await p.stop();
    await Promise.all(nodes.map((p) => p.stop()));
    for (const p of later.filter((p) => p.label !== "gateway" && !nodes.includes(p))) await p.stop();
  };
  const same = (a: LayerRange, b: LayerRange) => a.start === b.start && a.end === b.end;
  try {
    const tls = o.tlsDir
      ? await makeNetworkTls(o.tlsDir, { relay: host, gateway: hostPort(o.gatewayListen).host })
      : undefined;
    const relay = await ServiceProcess.start(
      "relay",
      ["relay", "--listen", `${host}:${o.relayPort ?? 0}`, ...tlsArgs(tls, "relay")],
      { STRATA_RELAY_SECRET: relaySecret },
    );
    started.push(relay);
    const relayUrl = String(relay.ready.url);
    say(`relay    ${relayUrl}`);
    const trackerArgs = async (listen: string) => [
      "tracker",
      "--model",
      o.model,
      "--reference",
      // this machine holds the model: it may certify the tracker's reference itself
      o.reference ?? await ensureReference((await resolveModel(o.model)).path, { backend: o.backend }),
      "--listen",
      listen,
      "--db",
      o.dbPath,
      "--lease-ms",
      String(o.leaseMs),
      "--relay",
      relayUrl,
      ...(o.repairReserve ? ["--repair-reserve", String(o.repairReserve)] : []),
      ...tlsArgs(tls, "tracker"),
    ];
    // the tracker's secrets, in its environment
    const trackerEnv = {
      STRATA_NODE_TOKEN: nodeToken,
      STRATA_RELAY_TOKEN: await peerToken(relaySecret, "tracker"),
    };
    const tracker = await ServiceProcess.start(
      "tracker",
      await trackerArgs(`${host}:${o.trackerPort ?? 0}`),
      trackerEnv,
    );
    started.push(tracker);
    const trackerUrl = String(tracker.ready.url);
    say(`tracker  ${trackerUrl}`);
    keep.watch(
      tracker,
      trackerUrl,
      async (listen) => ServiceProcess.start("tracker", await trackerArgs(listen), trackerEnv),
    );
    if (o.placed) {
      const at = { trackerUrl, relayUrl, relaySecret, nodeToken, tls };
      const net = await placedNetwork(o, at, started, tabs, say, keep);
      return {
        ...net,
        tracker: trackerUrl,
        pid: (service: "tracker" | "gateway") => keep.pid(service),
        relay: relayUrl,
        browser: tabs[0],
        tabs,
        stop,
      };
    }
    const nodes: NodeProc[] = [];
    for (let r = 0; r < o.routes; r++) {
      for (const [i, range] of o.split.entries()) {
        if (r === 0 && o.browserShard && same(range, o.browserShard)) continue;
        const name = `r${r}n${i}`;
        const wasm = o.wasmShards?.some((w) => same(w, range));
        const node = await trackedNodeArgs({
          model: o.model,
          range,
          name,
          tracker: trackerUrl,
          nodeToken,
          listen: `${host}:0`,
          relay: relayUrl,
          relaySecret,
          threads: o.threads,
          tls,
        });
        const p = await ServiceProcess.start(`node ${name}`, [
          ...node.args,
          ...(wasm ? ["--engine", "wasm"] : ["--backend", o.backend]),
          ...nodeTuningArgs(o),
          ...(o.batchInvariant === false ? ["--no-batch-invariant"] : []),
          // volunteers download from the nodes that hold their layers, too
          "--serve-artifact",
          `${host}:0`,
        ], node.env);
        started.push(p);
        const url = (p.ready.urls as string[])[0];
        nodes.push({ name, layers: formatRange(range), route: r, url, process: p });
        say(
          `node     ${name} layers ${formatRange(range)}${wasm ? " (WASM)" : ""} at ${url} (${
            Number(p.ready.tokens_per_s).toFixed(0)
          } tok/s alone)`,
        );
      }
    }
    await waitAdmitted(trackerUrl, nodes.length);
    say(`admitted ${nodes.length} nodes`);
    const plane = { trackerUrl, relayUrl, relaySecret, nodeToken, tls };
    const offered = o.split.map(formatRange).join(",");
    const gateway = await gatewayProcess(o, plane, offered);
    started.push(gateway);
    const gatewayUrl = String(gateway.ready.url);
    keep.watch(
      gateway,
      gatewayUrl,
      (listen) => gatewayProcess({ ...o, gatewayListen: listen }, plane, offered),
    );
    say(`gateway  ${gatewayUrl} (pages: ${pagesOf(gatewayUrl)})`);
    if (o.browserShard) {
      browser = await openVolunteerTab(gatewayUrl, {
        layers: formatRange(o.browserShard),
        threads: o.threads,
        trustCa: tls?.ca,
      });
      const s = await browser.contribute();
      const mib = (n = 0) => (n / 2 ** 20).toFixed(1);
      say(
        `tab      ${s.name} layers ${formatRange(o.browserShard)} (${s.engine}; downloaded ${
          mib(s.download?.fetchedBytes)
        } MiB, cached ${mib(s.download?.cachedBytes)} MiB of ${mib(s.assignment?.fileBytes)} MiB)`,
      );
      await waitAdmitted(trackerUrl, nodes.length + 1);
    }
    return {
      gateway: gatewayUrl,
      tracker: trackerUrl,
      pid: (service: "tracker" | "gateway") => keep.pid(service),
      relay: relayUrl,
      nodes,
      browser,
      tabs,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
