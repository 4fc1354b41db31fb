// The WASM engine in Node: the very module Deno and the browser load (strata.mjs + .wasm
// + worker, pthreads as worker_threads) through the core's one loader and WasmEngine from
// src/ (directly, on this thread), bundled for Node by the test. A 2-shard split (0:12,
// 12:30) with 2 threads, fed a native greedy run's tokens; writes each step's logits. Then
// the same split as a route of two shard nodes started by Node's host of the one node
// runtime (nodejs/start-node.ts), gRPC seams on loopback, generating greedily on its own.
// Prints one JSON object.
// Arguments: wasm dir, model path, JSON {prompt, tokens}, logits file.
import { readFileSync, writeFileSync } from "node:fs";
import { type LayerRange, layerRange } from "../../src/engine/layer-range.ts";
import type { RangeEngine, SeqId } from "../../src/engine/range-engine.ts";
import { top2 } from "../../src/parity/compare.ts";
import { loadWasmEngineFrom } from "../../src/engine/wasm/load-engine.ts";
import { sha256Hex } from "../../src/gguf/manifest.ts";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { importPrivateRouteKey, importPublicRouteKey, newRouteKeyText } from "../../src/route/keys.ts";
import { signRoute } from "../../src/route/plan.ts";
import { RouteSession } from "../../src/route/route-session.ts";
import { Dialer } from "../../node-apis/seam/dialer.ts";
import { folderWasmFiles } from "../../node-apis/wasm/folder-files.ts";
import { startNodeJsNode } from "../../nodejs/start-node.ts";

const [dir, modelPath, plan, logitsFile] = process.argv.slice(2);
const { prompt, tokens: forced } = JSON.parse(plan) as { prompt: number[]; tokens: number[] };
const files = folderWasmFiles(dir);

const bytes = new Uint8Array(readFileSync(modelPath));
const spec = { modelPath, kvCells: 256, maxSequences: 1, batchTokens: 64, threads: 2 };
const load = async (range: LayerRange) =>
  (await loadWasmEngineFrom(files, { spec: { ...spec, range }, model: bytes })).engine;
const head = await load(layerRange(0, 12, 30));
const tail = await load(layerRange(12, 30, 30));

async function step(e: RangeEngine, seq: SeqId, input: Int32Array | Float32Array, pos: number, n: number) {
  return await e.decode({
    ...(input instanceof Int32Array ? { tokens: input } : { hidden: input }),
    seq: new Int32Array(n).fill(seq),
    pos: Int32Array.from({ length: n }, (_, k) => pos + k),
    outputs: Uint8Array.from({ length: n }, (_, k) => (k === n - 1 ? 1 : 0)),
  });
}

const [sh, st] = [head.openSequence(), tail.openSequence()];
const tokens: number[] = [];
const logits: Float32Array[] = [];
let input = Int32Array.from(prompt);
let pos = 0;
for (let i = 0; i < forced.length; i++) {
  const n = input.length;
  const h = await step(head, sh, input, pos, n); // every row's hidden state
  const t = await step(tail, st, h.data, pos, n);
  logits.push(t.data);
  tokens.push(top2(t.data).best);
  pos += n;
  input = Int32Array.of(forced[i]);
}
const all = new Float32Array(logits.reduce((k, l) => k + l.length, 0));
logits.reduce((o, l) => (all.set(l, o), o + l.length), 0);
writeFileSync(logitsFile, new Uint8Array(all.buffer));
await Promise.all([head.close(), tail.close()]);

// the route: two nodes of the one runtime under Node, a route key of our own
const keyText = await newRouteKeyText();
const routeKey = await importPublicRouteKey(keyText);
const node = (name: string, range: LayerRange) =>
  startNodeJsNode({
    name,
    wasmDir: dir,
    modelPath,
    range,
    kvCells: 256,
    maxSessions: 1,
    batchTokens: 64,
    threads: 2,
    leaseMs: 60_000,
    listen: { host: "127.0.0.1", port: 0 },
    routeKey,
  });
const nodes = [
  await node("node-head", layerRange(0, 12, 30)),
  await node("node-tail", layerRange(12, 30, 30)),
];
const artifactSha256 = hexToBytes(await sha256Hex(bytes));
const sessionId = "node-route";
const hops = await signRoute(
  await importPrivateRouteKey(keyText),
  nodes.map((n) => ({ url: n.urls[0], range: n.node.engine.facts.range })),
  { sessionId, routeEpoch: 1n, artifactSha256 },
  60_000,
  "wasm-node test",
);
const dialer = await Dialer.connect();
const session = await RouteSession.open(dialer.dial, hops, {
  sessionId,
  epoch: 1n,
  artifactSha256,
  kvCells: prompt.length + forced.length,
});
const routeTokens: number[] = [];
for await (const r of session.generate(Int32Array.from(prompt), forced.length, () => false)) {
  routeTokens.push(r.token);
}
await session.release();
dialer.close();
for (const n of nodes) await n.close();

console.log(
  JSON.stringify({
    runtime: `node ${process.versions.node}`,
    backends: [head.backend, tail.backend],
    tokens,
    route: {
      urls: nodes.map((n) => n.urls[0]),
      engines: nodes.map((n) => n.node.engine.backend),
      tokens: routeTokens,
    },
  }),
);
process.exit(0);
