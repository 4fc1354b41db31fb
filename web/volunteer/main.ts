// The volunteer page: shows the range the network asks this tab to host (memory and
// download it takes); on one press downloads only that range's pieces (OPFS-cached,
// hash-checked), loads them into the WASM engine (WebGPU when the adapter can, else CPU),
// connects to the relay, joins the tracker through the gateway, passes admission and
// serves seams, showing live what it does. Closing the tab leaves the network.
import { type DownloadReport, downloadShard } from "../../src/artifact/download.ts";
import { checkManifest } from "../../src/artifact/pieces.ts";
import { layerRange } from "../../src/engine/layer-range.ts";
import type { RangeMemory } from "../../src/engine/memory-fit.ts";
import {
  type StrataModule,
  WASM32_MEMORY_CAP,
  WASM_MAX_THREADS,
  WasmEngine,
} from "../../src/engine/wasm/wasm-engine.ts";
import { runtimeGpu, wasmFlavorFor } from "../../src/engine/wasm/webgpu-support.ts";
import { sha256Hex } from "../../src/gguf/manifest.ts";
import { measureDecode } from "../../src/node/measure.ts";
import { ShardNode } from "../../src/node/shard-node.ts";
import { RelayPeer } from "../../src/relay/peer.ts";
import { parseHopUrl } from "../../src/route/hop-url.ts";
import { SeamError } from "../../src/seam/errors.ts";
import { fromBase64 } from "../../src/bytes/base64.ts";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { OpfsPieceStore } from "./opfs-store.ts";
import { connectBrowserRelay } from "./relay-socket.ts";

interface Assignment {
  model: string;
  artifact: string;
  nLayer: number;
  range: { start: number; end: number };
  hostsAlready: number;
  fileBytes: number;
  downloadBytes: number;
  memory: RangeMemory;
  memoryCapBytes: number;
  kvCells: number;
  maxSessions: number;
  batchTokens: number;
  manifestUrl: string;
  sources: { url: string; layers?: { start: number; end: number } }[];
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
const params = new URLSearchParams(location.search);

/** What the page shows, also read by tests through globalThis.strataVolunteer. */
const state = {
  phase: "idle" as string,
  error: "",
  assignment: undefined as Assignment | undefined,
  download: undefined as Omit<DownloadReport, "model"> | undefined,
  engine: "",
  fallback: "",
  tokensPerS: 0,
  name: "",
  admission: "",
  info: {} as Record<string, number | string>,
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

async function post<T>(path: string, body: unknown): Promise<T> {
  const r = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const j = await r.json();
  if (!r.ok) throw new Error(j?.error?.message ?? `${path}: HTTP ${r.status}`);
  return j as T;
}

async function ask(): Promise<void> {
  const q = new URLSearchParams({ memoryCap: String(WASM32_MEMORY_CAP) });
  if (params.get("layers")) q.set("layers", params.get("layers")!);
  const r = await fetch(`/volunteer/api/assignment?${q}`);
  const a = await r.json();
  if (!r.ok) throw new Error(a?.error?.message ?? `assignment: HTTP ${r.status}`);
  state.assignment = a as Assignment;
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
      `${mib(a.memory.total)} (weights ${mib(a.memory.weightBytes)} + KV cache ${mib(a.memory.kvBytes)})`,
    ],
    ["sessions", `up to ${a.maxSessions} at once, ${a.kvCells} KV cells`],
  ]);
  $<HTMLButtonElement>("contribute").disabled = false;
}

async function instantiate(flavor: "cpu" | "webgpu"): Promise<{ m: StrataModule; wasmSha: string }> {
  const base = `/volunteer/engine/${flavor}`;
  const wasm = new Uint8Array(await (await fetch(`${base}/strata.wasm`)).arrayBuffer());
  const { default: createStrata } = await import(/* @vite-ignore */ `${base}/strata.mjs`);
  const m = await createStrata({ wasmBinary: wasm, print: () => {}, printErr: () => {} }) as StrataModule;
  return { m, wasmSha: await sha256Hex(wasm) };
}

async function contribute(): Promise<void> {
  const a = state.assignment!;
  $<HTMLButtonElement>("contribute").disabled = true;
  const bar = $<HTMLProgressElement>("progress");

  phase("downloading");
  const manifest = checkManifest(await (await fetch(a.manifestUrl)).json(), a.artifact);
  const { model, ...report } = await downloadShard({
    manifest,
    start: a.range.start,
    end: a.range.end,
    sources: a.sources,
    store: await OpfsPieceStore.open(),
    onProgress: (p) => {
      bar.max = p.bytes;
      bar.value = p.bytesDone;
    },
  });
  state.download = report;
  $("note").textContent = `downloaded ${mib(report.fetchedBytes)}, reused ${
    mib(report.cachedBytes)
  } from this browser's cache, of a ${mib(a.fileBytes)} file`;

  phase("loading the engine");
  let flavor: "cpu" | "webgpu" = "cpu";
  if (params.get("backend") !== "cpu") {
    const choice = await wasmFlavorFor(runtimeGpu());
    flavor = choice.flavor;
    if (choice.flavor === "cpu") state.fallback = choice.fallback;
  }
  const threads = Number(params.get("threads")) ||
    Math.max(1, Math.min(WASM_MAX_THREADS, Math.floor((navigator.hardwareConcurrency ?? 2) / 2)));
  const { m, wasmSha } = await instantiate(flavor);
  const engine = await WasmEngine.load(m, model, {
    modelPath: "shard.gguf",
    range: layerRange(a.range.start, a.range.end, a.nLayer),
    kvCells: a.kvCells,
    maxSequences: a.maxSessions,
    batchTokens: a.batchTokens,
    threads,
    gpuLayers: flavor === "webgpu" ? 999 : 0,
  }, { suspends: flavor === "webgpu" });
  state.engine = engine.backend;
  state.tokensPerS = await measureDecode(engine);

  phase("connecting");
  const id = await post<{ name: string; token: string; relayUrl: string }>("/volunteer/api/token", {});
  state.name = id.name;
  const peer = new RelayPeer(await connectBrowserRelay(id.relayUrl, id.token), id.name);
  const relay = id.relayUrl.replace(/\/$/, "");
  let keyFromTracker!: (k: CryptoKey) => void;
  // batch-invariant: each session has a KV stream of its own (llama.cpp pads each stream)
  const { kvCells, kvCellsPerSequence: sessionCells } = await engine.memory();
  const node = new ShardNode(engine, {
    nodeId: id.name,
    artifactSha256: hexToBytes(a.artifact),
    recipe: hexToBytes(await sha256Hex(new TextEncoder().encode(`${wasmSha}|${engine.backend}`))),
    engineLabel: engine.backend,
    routeKey: new Promise<CryptoKey>((r) => (keyFromTracker = r)),
    dial: (url) => {
      const hop = parseHopUrl(url);
      if (hop.kind !== "relay" || hop.relay !== relay) {
        throw new SeamError("unavailable", `a tab reaches other nodes only through its relay, not ${url}`);
      }
      return peer.dial(hop.peer);
    },
    // the engine computes on the page's thread: see BatcherLimits.yieldBeforeBatch
    limits: {
      maxBatchTokens: a.batchTokens,
      maxQueuedPerSession: 64,
      kvCells,
      kvCellsPerSession: sessionCells,
      yieldBeforeBatch: true,
    },
    leaseMs: 300_000,
  });
  peer.listen(node.serve);

  phase("joining");
  const join = () =>
    post<{ leaseMs: number; routePublicKey: string }>("/volunteer/api/join", {
      token: id.token,
      range: a.range,
      engine: engine.backend,
      decodeTokensPerS: state.tokensPerS,
      kvCells: a.kvCells,
      sessionCells: sessionCells,
      maxSessions: a.maxSessions,
      memoryCapBytes: WASM32_MEMORY_CAP,
    });
  const joined = await join();
  keyFromTracker(
    await crypto.subtle.importKey(
      "raw",
      fromBase64(joined.routePublicKey).slice(),
      { name: "Ed25519" },
      true,
      [
        "verify",
      ],
    ),
  );
  addEventListener("pagehide", () => {
    navigator.sendBeacon("/volunteer/api/leave", id.token);
    peer.close();
  });

  // one beat at a time: a late beat arriving after a newer one would report stale sessions
  let beating = false;
  const beat = async () => {
    if (beating) return;
    beating = true;
    try {
      const info = await node.info();
      const r = await post<{ known: boolean; admission: string }>("/volunteer/api/heartbeat", {
        token: id.token,
        sessions: info.sessions,
        sessionIds: node.sessionIds(),
        kvCellsUsed: info.kvCellsUsed,
        queued: info.queued,
      });
      if (!r.known) await join();
      state.admission = r.admission || "pending";
      phase(state.admission === "admitted" ? "serving" : `admission: ${state.admission}`);
    } catch (e) {
      $("note").textContent = `heartbeat failed: ${e instanceof Error ? e.message : e}`;
    } finally {
      beating = false;
    }
  };
  setInterval(() => void beat(), Math.max(200, joined.leaseMs / 3));
  void beat();

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
    };
    show($("live"), [
      ["node", `${id.name}, layers ${a.range.start}–${a.range.end}`],
      ["engine", `${engine.backend}, ${threads} thread(s), ${state.tokensPerS.toFixed(1)} tok/s alone`],
      ...(state.fallback ? [["WebGPU", state.fallback] as [string, string]] : []),
      ["admission", state.admission || "pending"],
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
ask().catch((e) => {
  state.error = e instanceof Error ? e.message : String(e);
  show($("assignment"), [["status", state.error]]);
});
