// What a `strata up` network's two shapes share (a split route, or nodes the tracker places):
// its options, where its parts reach each other, its gateway, and the wait for admitted nodes.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { peerToken } from "../../src/relay/token.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import type { ClientLimitOptions } from "../../src/gateway/client-limits.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { ServiceProcess } from "../process/service-process.ts";
import { clientLimitArgs } from "../gateway/limit-options.ts";
import { type NetworkTls, tlsArgs } from "./network-tls.ts";

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
