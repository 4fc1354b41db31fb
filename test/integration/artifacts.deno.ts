// Partial artifacts on SmolLM2: an origin and two peers holding layers 10:20 (one of them
// tampering with every byte range it serves) feed a download of shard 10:20; then an
// interrupted download resumes from its store; manifests for another artifact or with
// pieces that do not tile the tensors are refused; the sparse shard loads in the native
// and the WASM engine and computes exactly what the whole file does. Prints one JSON object.
import { Hono } from "hono";
import { type DownloadReport, downloadShard } from "../../src/artifact/download.ts";
import { checkManifest, shardPieces } from "../../src/artifact/pieces.ts";
import { layerRange } from "../../src/engine/layer-range.ts";
import type { RangeEngine } from "../../src/engine/range-engine.ts";
import { maxAbsDiff } from "../../src/parity/compare.ts";
import { FsPieceStore } from "../../node-apis/artifact/fs-store.ts";
import { fetchManifest } from "../../server/artifacts/fetch-shard.ts";
import { artifactManifest } from "../../server/artifacts/manifest.ts";
import { artifactRoutes } from "../../server/artifacts/routes.ts";
import { writeSparseFile } from "../../server/artifacts/sparse-file.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { instantiateStrata } from "../../server/engine/wasm/load.ts";
import { WasmEngine } from "../../src/engine/wasm/wasm-engine.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";
import { serveHttp } from "../../server/http/serve-http.ts";

const modelPath = defaultModelPath();
const manifest = await artifactManifest(modelPath);
const id = manifest.artifact;
const [start, end] = [10, 20];
const tmp = await Deno.makeTempDir({ prefix: "strata-artifacts-" });

const origin = serveHttp(artifactRoutes([{ path: modelPath, manifest }]).fetch, "127.0.0.1", 0);
const peerApp = artifactRoutes([{ path: modelPath, manifest, layers: { start, end } }]);
const peer = serveHttp(peerApp.fetch, "127.0.0.1", 0);
// a dishonest peer: the honest peer's answers with one byte flipped in each
const liar = serveHttp(
  async (req) => {
    const r = await peerApp.fetch(req);
    if (r.status !== 206) return r;
    const bytes = new Uint8Array(await r.arrayBuffer());
    bytes[bytes.length >> 1] ^= 0x5a;
    return new Response(bytes, { status: 206, headers: r.headers });
  },
  "127.0.0.1",
  0,
);
const url = (s: { url: string }) => `${s.url}/artifacts/${id}`;
const layers = { start, end };

// 1. three sources; the liar is asked first for a third of the pieces
const store = new FsPieceStore(`${tmp}/store`);
const first = await downloadShard({
  manifest,
  start,
  end,
  sources: [{ url: url(liar), layers }, { url: url(peer), layers }, { url: url(origin) }],
  store,
});
const summary = (r: DownloadReport) => ({
  shardBytes: r.shardBytes,
  fetchedBytes: r.fetchedBytes,
  cachedBytes: r.cachedBytes,
  bySource: Object.fromEntries(
    Object.entries(r.bySource).map((
      [k, v],
    ) => [k.startsWith(liar.url) ? "liar" : k.startsWith(peer.url) ? "peer" : "origin", v]),
  ),
  rejectedReasons: [
    ...new Set(r.rejected.map((x) => `${x.source.startsWith(liar.url) ? "liar" : "other"}: ${x.reason}`)),
  ],
  rejected: r.rejected.length,
});

// 2. an interrupted download, then the same again: it resumes from the store
const resumeStore = new FsPieceStore(`${tmp}/resume`);
const ac = new AbortController();
const pieces = shardPieces(manifest, start, end).length;
let interrupted = "";
try {
  await downloadShard({
    manifest,
    start,
    end,
    sources: [{ url: url(origin) }],
    store: resumeStore,
    signal: ac.signal,
    concurrency: 1,
    onProgress: (p) => p.piecesDone >= pieces / 2 && ac.abort(),
  });
} catch (e) {
  interrupted = e instanceof Error ? e.name : String(e);
}
const resumed = await downloadShard({
  manifest,
  start,
  end,
  sources: [{ url: url(origin) }],
  store: resumeStore,
});

// 3. manifests that must be refused
const refusals: string[] = [];
const fakeId = "0".repeat(64);
const bad = serveHttp(
  new Hono().get(`/artifacts/${fakeId}/manifest`, (c) => c.json(manifest)).fetch,
  "127.0.0.1",
  0,
);
await fetchManifest(`${bad.url}/artifacts/${fakeId}`).catch((e) => refusals.push(e.message));
const shifted = {
  ...manifest,
  pieces: manifest.pieces.map((p, i) => (i === 5 ? { ...p, offset: p.offset + 4 } : p)),
};
try {
  checkManifest(JSON.parse(JSON.stringify(shifted)), id);
} catch (e) {
  refusals.push((e as Error).message);
}

// 4. the sparse shard in both engines against the whole file
const sparsePath = `${tmp}/shard.gguf`;
await writeSparseFile(sparsePath, first.model);
const st = await Deno.stat(sparsePath);
const spec = { kvCells: 64, maxSequences: 1, batchTokens: 16, threads: 1, range: layerRange(start, end, 30) };
const hidden = Float32Array.from({ length: 4 * 576 }, (_, i) => Math.sin(i * 0.37) * 3);
const run = async (e: RangeEngine) => {
  const seq = e.openSequence();
  const out = await e.decode({
    hidden,
    seq: new Int32Array(4).fill(seq),
    pos: Int32Array.of(0, 1, 2, 3),
    outputs: new Uint8Array(4).fill(1),
  });
  await e.close();
  return out.data;
};
const nativeWhole = await run(await NativeEngine.load({ ...spec, modelPath }, "cpu"));
const nativeSparse = await run(await NativeEngine.load({ ...spec, modelPath: sparsePath }, "cpu"));
const wasmWhole = await run(
  await WasmEngine.load(await instantiateStrata("cpu"), await Deno.readFile(modelPath), {
    ...spec,
    modelPath,
  }),
);
const wasmSparse = await run(
  await WasmEngine.load(await instantiateStrata("cpu"), first.model, { ...spec, modelPath }),
);

console.log(JSON.stringify({
  fileBytes: manifest.fileSize,
  pieces,
  first: summary(first),
  interrupted,
  resumed: summary(resumed),
  refusals,
  sparseFile: { size: st.size, allocatedBytes: (st.blocks ?? 0) * 512 },
  nativeSparseVsWhole: maxAbsDiff(nativeSparse, nativeWhole),
  wasmSparseVsWhole: maxAbsDiff(wasmSparse, wasmWhole),
}));
await Promise.all([origin.close(), peer.close(), liar.close(), bad.close()]);
await Deno.remove(tmp, { recursive: true });
Deno.exit(0);
