// The volunteer page: shows the range the network asks this tab to host (memory and
// download it takes); on one press downloads only that range's pieces (OPFS-cached,
// hash-checked), loads them into the WASM engine (WebGPU when the adapter can, else CPU),
// connects to the relay, joins the tracker (its Connect service, through the gateway), passes admission and
// serves seams, showing live what it does. Closing the tab leaves the network.
import { type DownloadReport, downloadShard } from "../../src/artifact/download.ts";
import { rangePieces } from "../../src/artifact/serve-pieces.ts";
import { relayPieceFetch } from "../../src/relay/piece-fetch.ts";
import { relayHopUrl } from "../../src/route/hop-url.ts";
import { type ArtifactManifest, manifestFromResponse } from "../../src/artifact/pieces.ts";
import { layerRange } from "../../src/engine/layer-range.ts";
import { WASM32_MEMORY_CAP, WASM_MAX_THREADS } from "../../src/engine/wasm/wasm-engine.ts";
import { nodeEngineSpec, startShardNode } from "../../src/node/runtime.ts";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { ConnectError } from "@connectrpc/connect";
import {
  offeredRanges,
  tabPlaceRequest,
  type VolunteerAssignment,
  volunteerAssignment,
  type VolunteerConfig,
  type VolunteerIdentity,
} from "../../src/tracker/placement/volunteer-assignment.ts";
import { loadEngine } from "../host/engine.ts";
import { connectDialer } from "../host/dialer.ts";
import { seamListeners } from "../host/listeners.ts";
import { nodeTracker, type TabTracker, tabTracker } from "../host/tracker.ts";
import { pieceStore } from "../host/piece-store.ts";
import { probeMainThread } from "./main-thread-probe.ts";
import { cannotRun, pageAbilities } from "./can-run.ts";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
const params = new URLSearchParams(location.search);
// what this tab's engine may hold: the page's memoryCap (bytes), never past what wasm32 addresses
const memoryCap = Math.min(Number(params.get("memoryCap")) || WASM32_MEMORY_CAP, WASM32_MEMORY_CAP);
const mainThread = probeMainThread();

/** What the page shows, also read by tests through globalThis.strataVolunteer. */
const state = {
  phase: "idle" as string,
  error: "",
  assignment: undefined as VolunteerAssignment | undefined,
  download: undefined as Omit<DownloadReport, "model"> | undefined,
  engine: "",
  fallback: "",
  tokensPerS: 0,
  name: "",
  admission: "",
  info: {} as Record<string, number | string>,
  /** the relay connection: up, or down (and being dialed again) with the reason */
  relay: "",
  relayDrops: 0,
  /** how long this page's thread was blocked since the tab began to serve */
  mainThread: mainThread.figures,
};

function show(dl: HTMLElement, rows: [string, string][]): void {
  dl.replaceChildren(...rows.flatMap(([k, v]) => {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    return [dt, dd];
  }));
}

function phase(p: string, note = ""): void {
  state.phase = p;
  $("phase").textContent = p;
  if (note) $("note").textContent = note;
}

/** What the tab needs across its steps: the gateway's config, its identity, the manifest. */
let held: {
  config: VolunteerConfig;
  id: VolunteerIdentity;
  manifest: ArtifactManifest;
  tracker: TabTracker;
  trackerUrl: string;
} | undefined;

async function getJson<T>(path: string, init?: RequestInit): Promise<T> {
  const r = await fetch(path, init);
  const j = await r.json();
  if (!r.ok) throw new Error(j?.error?.message ?? `${path}: HTTP ${r.status}`);
  return j as T;
}

/** The range to offer: the tracker's placement for this tab, or one of the split. */
async function candidates(
  config: VolunteerConfig,
  tracker: TabTracker,
  id: VolunteerIdentity,
  nLayer: number,
) {
  if (config.split.length > 0 || params.get("layers")) {
    const split = config.split.map((r) => layerRange(r.start, r.end, nLayer));
    return offeredRanges(split, params.get("layers") ?? undefined, nLayer);
  }
  try {
    const r = await tracker.place(
      { token: id.token, node: id.name, ...tabPlaceRequest(hexToBytes(config.artifact), memoryCap) },
      { timeoutMs: 10_000 },
    );
    return [layerRange(r.range!.start, r.range!.end, nLayer)];
  } catch (e) {
    throw new Error(`no range for this tab: ${e instanceof ConnectError ? e.rawMessage : e}`);
  }
}

async function ask(): Promise<void> {
  const config = await getJson<VolunteerConfig>("/volunteer/config");
  // the tab's name from the start: the tracker's placement holds its range under it
  const id = await getJson<VolunteerIdentity>("/volunteer/identity", { method: "POST" });
  state.name = id.name;
  const manifest = await manifestFromResponse(await fetch(`${config.artifactUrl}/manifest`), config.artifact);
  const trackerUrl = new URL(config.trackerPath, location.href).href;
  const tracker = tabTracker(trackerUrl);
  held = { config, id, manifest, tracker, trackerUrl };
  const offered = await candidates(config, tracker, id, manifest.nLayer);
  const { nodes } = await tracker.nodes({}, { timeoutMs: 5000 });
  const a = volunteerAssignment(
    { name: config.model, manifest, kv: config.kv, graph: config.graph },
    { candidates: offered, capBytes: memoryCap, nodes, artifactUrl: config.artifactUrl },
  );
  state.assignment = a;
  show($("assignment"), [
    ["model", `${a.model} (artifact ${a.artifact.slice(0, 12)}…)`],
    [
      "layers",
      `${a.range.start}–${a.range.end} of ${a.nLayer} (hosted now by ${a.hostsAlready} other node(s))`,
    ],
    [
      "download",
      `${mib(a.downloadBytes)} of the ${mib(a.fileBytes)} file, from ${a.sources.length} source(s)`,
    ],
    [
      "memory",
      `${mib(a.memory.total)} (weights ${mib(a.memory.weightBytes)} + KV cache ${mib(a.memory.kvBytes)} + ` +
      `compute ${mib(a.memory.computeBytes)})`,
    ],
    ["sessions", `up to ${a.maxSessions} at once, ${a.kvCells} KV cells`],
  ]);
  $<HTMLButtonElement>("contribute").disabled = false;
}

async function contribute(): Promise<void> {
  const a = state.assignment!;
  $<HTMLButtonElement>("contribute").disabled = true;
  const bar = $<HTMLProgressElement>("progress");

  // the relay first: other tabs that hold this range are sources too, reached through it
  phase("connecting");
  const { config, id, manifest, trackerUrl } = held!;
  const relayUrl = config.relayUrl;
  // a dropped connection is dialed again, and the tab serves on under its name (no reload)
  const dialer = await connectDialer({ url: relayUrl, token: id.token }, id.name, (up, detail) => {
    if (up === "down" && state.relay !== "down") state.relayDrops++;
    state.relay = up;
    $("note").textContent = up === "up"
      ? `relay: ${detail}`
      : `relay connection lost (${detail}); reconnecting`;
  });
  const { peer } = dialer.relay;
  state.relay = "up";

  phase("downloading");
  const store = await pieceStore();
  const { model, ...report } = await downloadShard({
    manifest,
    start: a.range.start,
    end: a.range.end,
    sources: a.sources,
    store,
    fetch: relayPieceFetch(peer, relayUrl),
    onProgress: (p) => {
      bar.max = p.bytes;
      bar.value = p.bytesDone;
    },
  });
  state.download = report;
  $("note").textContent = `downloaded ${mib(report.fetchedBytes)}, reused ${
    mib(report.cachedBytes)
  } from this browser's cache, of a ${mib(a.fileBytes)} file`;
  // and now this tab is a source of its range's pieces for the next one
  peer.servePieces(rangePieces(manifest, a.range.start, a.range.end, store));

  phase("loading the engine");
  const threads = Number(params.get("threads")) ||
    Math.max(1, Math.min(WASM_MAX_THREADS, Math.floor((navigator.hardwareConcurrency ?? 2) / 2)));
  // in a worker of its own: this page's thread carries the seams
  const { engine, fallback } = await loadEngine(new URL("/volunteer/engine", location.href), {
    spec: nodeEngineSpec({
      modelPath: "shard.gguf",
      range: layerRange(a.range.start, a.range.end, a.nLayer),
      kvCells: a.kvCells,
      maxSessions: a.maxSessions,
      batchTokens: a.batchTokens,
      threads,
      memoryCapBytes: memoryCap,
    }),
    model,
    webgpu: params.get("backend") !== "cpu",
  });
  state.fallback = fallback ?? "";
  state.engine = engine.backend;

  const tracker = nodeTracker(trackerUrl, id.name, id.token);
  addEventListener("pagehide", () => {
    void tracker.leave();
    dialer.close();
  });

  phase("joining");
  // the one node runtime, with a tab's adapters: everything goes through its relay
  const { node, tokensPerS, batchCost } = await startShardNode({
    name: id.name,
    artifactSha256: hexToBytes(a.artifact),
    kvCells: a.kvCells,
    maxSessions: a.maxSessions,
    batchTokens: a.batchTokens,
    leaseMs: 300_000,
    // its range's pieces, through the relay
    artifactUrl: relayHopUrl(relayUrl, id.name),
  }, {
    engine,
    dial: dialer.dial,
    listeners: seamListeners(dialer),
    tracker,
    memoryCapBytes: memoryCap,
  }, {
    onAdmission: (admission) => {
      state.admission = admission;
      phase(admission === "admitted" ? "serving" : `admission: ${admission}`);
    },
    onBeatFailed: (e) => $("note").textContent = `heartbeat failed: ${e instanceof Error ? e.message : e}`,
  });
  state.tokensPerS = tokensPerS;
  mainThread.reset();

  setInterval(async () => {
    const i = await node.info();
    state.info = {
      sessionsNow: i.sessions,
      sessionsServed: Number(i.sessionsServed),
      prefillTokens: Number(i.prefillTokens),
      decodeTokens: Number(i.decodeTokens),
      batches: Number(i.batches),
      lastBatchSessions: i.lastBatchSessions,
      maxBatchSessions: i.maxBatchSessions,
      seamBytesIn: Number(i.seamBytesIn),
      seamBytesOut: Number(i.seamBytesOut),
      kvCellsUsed: i.kvCellsUsed,
      engineMs: i.engineMs,
      // a step alone and in a batch as timed at load, and the cohorts chosen from them (1: on)
      stepMs: batchCost.oneMs,
      batchStepMs: batchCost.batchMs,
      batchSessions: batchCost.batchSessions,
      cohorts: batchCost.cohorts ? 1 : 0,
      cohortsBy: batchCost.cohortsBy,
      maxSessions: i.maxSessions,
    };
    show($("live"), [
      ["node", `${id.name}, layers ${a.range.start}–${a.range.end}`],
      ["engine", `${engine.backend}, ${threads} thread(s), ${state.tokensPerS.toFixed(1)} tok/s alone`],
      ...(state.fallback ? [["WebGPU", state.fallback] as [string, string]] : []),
      ["admission", state.admission || "pending"],
      ["relay", `${state.relay}${state.relayDrops ? `, reconnected after ${state.relayDrops} drop(s)` : ""}`],
      ["sessions", `${i.sessions} now, ${i.sessionsServed} served`],
      ["tokens", `${i.prefillTokens} prompt, ${i.decodeTokens} generated`],
      ["batches", `${i.batches}; last ${i.lastBatchSessions} session(s), largest ${i.maxBatchSessions}`],
      ["seam bytes", `${mib(Number(i.seamBytesIn))} in, ${mib(Number(i.seamBytesOut))} out`],
      ["KV cells", `${i.kvCellsUsed} of ${a.kvCells} in use`],
    ]);
  }, 500);
}

$("contribute").addEventListener("click", () => {
  contribute().catch((e) => {
    state.error = e instanceof Error ? e.message : String(e);
    phase("failed");
    $("note").className = "error";
    $("note").textContent = state.error;
  });
});

(globalThis as unknown as { strataVolunteer: unknown }).strataVolunteer = { state };
const why = cannotRun(pageAbilities());
if (why.length) {
  // says why in words, and asks the network for nothing
  state.error = why.join(" ");
  phase("cannot run");
  show($("assignment"), why.map((w) => ["cannot run", w]));
  $("note").className = "error";
  $("note").textContent = "This tab cannot host a shard here.";
} else {
  ask().catch((e) => {
    state.error = e instanceof Error ? e.message : String(e);
    show($("assignment"), [["status", state.error]]);
  });
}
