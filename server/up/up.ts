// `strata up`: a whole local network — relay, tracker, routes of native shard nodes and a
// gateway — each in its own process; ready once every node is admitted.
import { formatRange, type LayerRange } from "../../src/engine/layer-range.ts";
import { peerToken } from "../../src/relay/token.ts";
import type { NativeBackend } from "../engine/native/build.ts";
import { resolveModel } from "../model/fetch.ts";
import { ensureReference } from "../model/reference-file.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { ServiceProcess } from "../process/service-process.ts";
import { openVolunteerTab, type VolunteerTab } from "../web/volunteer-tab.ts";
import { nodeTuningArgs, trackedNodeArgs } from "./node-args.ts";
import { placedNetwork } from "./placed.ts";
import { KeepUp } from "./keep-up.ts";
import { clientLimitArgs } from "../gateway/limit-options.ts";
import type { ClientLimitOptions } from "../../src/gateway/client-limits.ts";
import { makeNetworkTls, type NetworkTls, tlsArgs } from "./network-tls.ts";
import { hostPort } from "../cli-options.ts";

export interface UpOptions {
  /** "smollm2" or a GGUF path, as every part resolves it */
  readonly model: string;
  /** the model's signed probe reference (default: certified here once, and cached) */
  readonly reference?: string;
  readonly split: LayerRange[];
  readonly routes: number;
  readonly backend: NativeBackend;
  readonly threads: number;
  readonly gatewayListen: string;
  /** the address every server of the network binds to and advertises (default 127.0.0.1) */
  readonly listenHost?: string;
  /** fixed ports for the relay and the tracker, which other hosts are told (default: any free) */
  readonly relayPort?: number;
  readonly trackerPort?: number;
  readonly apiKeys: string[];
  readonly leaseMs: number;
  /** concurrent sessions per node (the node's own default when absent) */
  readonly maxSessions?: number;
  /** KV cells per node (the node's own default when absent) */
  readonly kvCells?: number;
  /** most tokens one session may hold (the node's own default when absent) */
  readonly ctxSize?: number;
  /** a node lets a session go that was opened and given no step this long (the node's default when absent) */
  readonly unusedSessionMs?: number;
  /** false: nodes share one KV pool and run the fastest kernels (see ShardSpec.batchInvariant) */
  readonly batchInvariant?: boolean;
  /** the gateway's queue for busy routes */
  readonly admission?: { readonly maxWaiting: number; readonly timeoutMs: number };
  /** what one client may take of the gateway (default: no limit) */
  readonly clientLimits?: ClientLimitOptions;
  /** how long the gateway waits for a route to take over from one that lost a node */
  readonly repairDeadlineMs?: number;
  /** false: the gateway's repairs re-prefill whole routes (the lost-hop rebuild off, to compare) */
  readonly repairResume?: boolean;
  /** false: the gateway prefills every prompt whole and nodes keep no session's KV */
  readonly prefixReuse?: boolean;
  /** the gateway mirrors the KV of prompts of at least this many positions to standbys (0: off) */
  readonly kvMirror?: number;
  /** KV cells each node keeps as prefix entries (0: none; default: the node's) */
  readonly prefixCells?: number;
  /** session slots on every layer the tracker keeps free of new sessions, for repairs */
  readonly repairReserve?: number;
  readonly dbPath: string;
  /** nodes' registration token at the tracker (a fresh one when absent) */
  readonly nodeToken?: string;
  /** the relay's secret, which mints peers' tokens (a fresh one when absent) */
  readonly relaySecret?: string;
  /** called as each part comes up */
  readonly progress?: (what: string) => void;
  /** this range of the first route is a headless Chromium tab on the volunteer page */
  readonly browserShard?: LayerRange;
  /** these ranges run on the WASM engine in Deno nodes */
  readonly wasmShards?: readonly LayerRange[];
  /**
   * no split: every participant is capped at `capBytes` and placed by the tracker — `tabs`
   * headless tabs, `wasm` Deno WASM nodes, then native nodes until every layer is covered
   */
  readonly placed?: { readonly capBytes: number; readonly tabs: number; readonly wasm: number };
  /** browser origins that may call the gateway's API (CORS) */
  readonly corsOrigins?: readonly string[];
  /** TLS on every seam, the relay, the tracker and the gateway, with a CA made in this folder */
  readonly tlsDir?: string;
}

export interface NodeProc {
  readonly name: string;
  readonly layers: string;
  readonly route: number;
  readonly url: string;
  readonly process: ServiceProcess;
}

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

/** Waits until `count` nodes are admitted and live; fails at once on a refusal. */
export async function waitAdmitted(trackerUrl: string, count: number, timeoutMs = 300_000): Promise<void> {
  const t = trackerClient(trackerUrl);
  try {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      const { nodes } = await t.client.nodes({}, { timeoutMs: 5000 });
      const refused = nodes.filter((n) => n.live && n.admission.startsWith("refused"));
      if (refused.length) {
        throw new Error(`admission refused ${refused.map((n) => `${n.node}: ${n.admission}`).join("; ")}`);
      }
      if (nodes.filter((n) => n.live && n.admission === "admitted").length >= count) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`nodes not admitted within ${timeoutMs / 1000} s`);
  } finally {
    t.close();
  }
}

/** Where the network's parts reach each other. */
export interface UpPlane {
  readonly trackerUrl: string;
  readonly relayUrl: string;
  readonly relaySecret: string;
  readonly nodeToken: string;
  /** the network's TLS files, when it runs TLS */
  readonly tls?: NetworkTls;
}

/** The gateway, offering volunteers these ranges ("auto": the tracker places each tab). */
export async function gatewayProcess(o: UpOptions, at: UpPlane, volunteers: string): Promise<ServiceProcess> {
  return await ServiceProcess.start("gateway", [
    "gateway",
    "--model",
    o.model,
    "--tracker",
    at.trackerUrl,
    "--listen",
    o.gatewayListen,
    "--relay",
    at.relayUrl,
    ...(o.admission
      ? ["--queue-max", String(o.admission.maxWaiting), "--queue-timeout-ms", String(o.admission.timeoutMs)]
      : []),
    ...(o.repairDeadlineMs !== undefined ? ["--repair-deadline-ms", String(o.repairDeadlineMs)] : []),
    ...(o.repairResume === false ? ["--no-repair-resume"] : []),
    ...(o.prefixReuse === false ? ["--no-prefix-reuse"] : []),
    ...(o.kvMirror ? ["--kv-mirror", String(o.kvMirror)] : []),
    ...(o.clientLimits ? clientLimitArgs(o.clientLimits) : []),
    ...(o.corsOrigins?.length ? ["--cors", o.corsOrigins.join(",")] : []),
    ...tlsArgs(at.tls, "gateway"),
    "--volunteers",
    volunteers,
  ], {
    // its secrets, in its environment
    STRATA_RELAY_SECRET: at.relaySecret,
    STRATA_NODE_TOKEN: at.nodeToken,
    STRATA_RELAY_TOKEN: await peerToken(at.relaySecret, "gateway"),
    ...(o.apiKeys.length ? { STRATA_API_KEYS: o.apiKeys.join(",") } : {}),
  });
}

/** The gateway's three pages, as `strata up` prints them. */
export const pagesOf = (gatewayUrl: string) =>
  ["chat", "volunteer", "network"].map((p) => `${gatewayUrl}/${p}/`).join(", ");
