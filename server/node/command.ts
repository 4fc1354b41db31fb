// `strata node`: serve one shard until Ctrl-C.
import { Command, InvalidArgumentError, Option } from "commander";
import { formatRange, type LayerRange, layerRange, parseLayerRange } from "../../src/engine/layer-range.ts";
import { WASM_MAX_THREADS } from "../../src/engine/wasm/wasm-engine.ts";
import { importPublicRouteKey, type RouteKeyText } from "../../src/route/keys.ts";
import { DEFAULT_MODEL } from "../model/default-model.ts";
import { fileFacts } from "../model/facts.ts";
import { resolveModel } from "../model/fetch.ts";
import {
  backendOption,
  count,
  hostPort,
  int,
  MEMORY_SIZE_HELP,
  memorySize,
  nativeBackend,
  readJsonFile,
  untilSignal,
} from "../cli/options.ts";
import { checkMemoryCap, manifestModel } from "../../src/engine/memory-cap.ts";
import { nodeDefaultPool, nodeMemoryCap } from "../engine/memory-cap.ts";
import { type RunningNode, startNode } from "./start-node.ts";
import { placedRange } from "./placed-range.ts";
import { Dialer } from "../../node-apis/seam/dialer.ts";
import { sha256File } from "../model/hash.ts";
import { log, logRelay } from "../log/log.ts";
import type { ArtifactManifest } from "../../src/artifact/pieces.ts";
import { fetchManifest, fetchShardFile, isArtifactUrl } from "../artifacts/fetch-shard.ts";
import { fileTap } from "../seam/tap.ts";
import { addSecretOption, needSecret, NODE_TOKEN, RELAY_TOKEN } from "../cli/secrets.ts";
import { addCaOption } from "../tls/options.ts";
import { trustCaFile } from "../../node-apis/tls/trust.ts";

/**
 * How long a native node keeps its core from idling after a step. A session's next step comes
 * within a route's round trip (milliseconds); an idle node stops spinning this long after its
 * last one. Measured on a 2-vCPU EPYC guest, a route of 2: a crossing 0.19 → 0.12 ms.
 */
const KEEP_AWAKE_MS = 50;

export function nodeCommand(): Command {
  return addSecretOption(addSecretOption(addCaOption(new Command("node")), NODE_TOKEN), RELAY_TOKEN)
    .description("serve one layer range of a model to routes (direct HTTP/2, a relay, or both)")
    .option(
      "--model <name|path|url>",
      `"${DEFAULT_MODEL.name}", a GGUF path, or an artifact URL (…/artifacts/<sha256>: only this range's bytes are downloaded)`,
      DEFAULT_MODEL.name,
    )
    .option("--serve-artifact <host:port>", "serve this range's bytes of the artifact for others to download")
    .option(
      "--artifact-public-url <url>",
      "advertise the served bytes at this URL instead of the --serve-artifact address (behind a forwarder)",
    )
    .requiredOption(
      "--layers <a:b|auto>",
      "the layer range to hold, e.g. 0:12; auto: the tracker places it (and moves it as nodes come and go)",
    )
    .option(
      "--route-key <file>",
      "route key file (its public half verifies route tickets); not with --tracker",
    )
    .option(
      "--tracker <url[,url…]>",
      "register with this tracker (it hands over the route key); replicas, comma-separated: the next when one fails",
    )
    .addOption(
      new Option("--inject-fault <kind>", "test aid: serve wrong outputs").choices(["scale", "scale-later"])
        .hideHelp(),
    )
    .option("--listen <host:port>", "serve seams here (port 0: any free port)")
    .option(
      "--public-url <url>",
      "advertise this seam URL instead of the listen address (behind a forwarder)",
    )
    .option("--relay <ws-url>", "also (or only) be reachable through this relay")
    .option("--name <name>", "node name in telemetry (defaults to the relay token's name)")
    .addOption(backendOption())
    .addOption(
      new Option("--engine <engine>", "native (FFI) or wasm (the WebAssembly build)").choices([
        "native",
        "wasm",
      ]).default("native"),
    )
    .option(
      "--webgpu",
      "with --engine wasm: run the layers on WebGPU when the adapter can (else CPU, saying why)",
    )
    .option("--wasm64", "with --engine wasm: the 64-bit-memory build (needs emscripten ≥ 4.0)")
    .option(
      "--threads <n>",
      "engine threads (default: this machine's cores)",
      int("threads"),
      navigator.hardwareConcurrency,
    )
    .option(
      "--kv-cells <n>",
      "KV cells of the node's one pool, shared by its sessions as they grow (default: room for " +
        "every session to hold 4096 tokens at once, halved until the range fits the memory cap; " +
        "8192 with --layers auto)",
      int("kv-cells"),
    )
    .option(
      "--ctx-size <n>",
      "most tokens one session may hold here (default: the model's trained context, at most " +
        "131072, and never more than the pool)",
      int("ctx-size"),
    )
    .option(
      "--no-batch-invariant",
      "the KV pool in any order and the CPU's fastest kernels (batched matmuls: faster prefill where the CPU has AMX), but a greedy answer may change with who else is asking",
    )
    .option("--max-sessions <n>", "concurrent Route Sessions", int("max-sessions"), 16)
    .option(
      "--keep-awake <ms>",
      "native engines: keep this node's core from idling this long after each step, with a " +
        "lowest-priority spinner (a core that halts between steps wakes slowly; 0: never)",
      count("keep-awake"),
      KEEP_AWAKE_MS,
    )
    .option(
      "--prefix-cells <n>",
      "KV cells finished sessions may keep as prefix entries for the prompts that extend them " +
        "(batch-invariant CPU and WebGPU engines only; 0: none; default: half the pool)",
      count("prefix-cells"),
    )
    .option(
      "--cohorts",
      "let a route's decoding sessions take turns in one cohort per shard, so its shards overlap (default: where a batch timed at load costs three times its weights' pass or more)",
    )
    .option(
      "--no-cohorts",
      "batch every ready step at once: a route's shards then compute in lockstep (default where a batch costs about what one step does: a memory-bound range)",
    )
    .option("--batch-tokens <n>", "most tokens in one engine call", int("batch-tokens"), 512)
    .option("--session-idle-ms <n>", "release a session idle this long", int("session-idle-ms"), 300_000)
    .option(
      "--unused-session-ms <n>",
      "release a session opened and given no step this long (a peer holding slots it never uses)",
      int("unused-session-ms"),
      120_000,
    )
    .option(
      "--memory-cap <size>",
      "refuse a range whose weights + KV + compute pass this, e.g. 512MB, 1.5GiB, 2G " +
        `(${MEMORY_SIZE_HELP}); advertised to the tracker. Default: the memory available now ` +
        "(native), 4 GiB (wasm), 16 GiB (wasm64); never more than a WASM engine addresses",
      memorySize,
    )
    .option(
      "--tls",
      "serve seams (and the artifact) over TLS, with a certificate the tracker signs (needs --ca)",
    )
    .action(async (o) => {
      if (!o.listen && !o.relay) throw new InvalidArgumentError("give --listen, --relay, or both");
      if (o.tls && (!o.tracker || !o.ca)) throw new InvalidArgumentError("--tls needs --tracker and --ca");
      await trustCaFile(o.ca);
      if ((o.webgpu || o.wasm64) && o.engine !== "wasm") {
        throw new InvalidArgumentError("--webgpu and --wasm64 need --engine wasm");
      }
      if (!o.routeKey === !o.tracker) throw new InvalidArgumentError("give --route-key or --tracker (one)");
      const trackerToken = o.tracker ? needSecret(o, NODE_TOKEN, "--tracker: ") : undefined;
      const relayToken = o.relay ? needSecret(o, RELAY_TOKEN, "--relay: ") : undefined;
      const auto = o.layers === "auto";
      if (auto && !o.tracker) {
        throw new InvalidArgumentError("--layers auto asks the tracker: give --tracker");
      }
      const kind = o.engine === "wasm" ? (o.wasm64 ? "wasm64" : "wasm32") : "native";
      const capBytes = nodeMemoryCap(kind, o.memoryCap);
      const flashAttention = o.engine === "wasm" ? !o.webgpu : nativeBackend(o.backend) === "cpu";
      const settings = {
        // a placed node's pool is fixed before its range is known: the tracker fits ranges to it
        kvCells: o.kvCells ?? 8192,
        maxSequences: o.maxSessions,
        batchTokens: o.batchTokens,
        batchInvariant: o.batchInvariant !== false,
      };
      // the artifact (its manifest, for a URL) and the local file, when there is one
      const manifest: ArtifactManifest | undefined = isArtifactUrl(o.model)
        ? await fetchManifest(o.model)
        : undefined;
      const localPath = manifest ? undefined : (await resolveModel(o.model)).path;
      const nLayer = manifest?.nLayer ?? (await fileFacts(localPath!)).nLayer;
      const key = o.routeKey ? await readJsonFile<RouteKeyText>(o.routeKey, "route key") : undefined;
      const name = o.name ?? (relayToken ? String(relayToken).split(".")[0] : `node-${o.layers}`);
      let moveTo: (range: LayerRange) => void = () => {};
      // where the range's bytes came from, when they were downloaded (bytes by source)
      let fetched: Readonly<Record<string, number>> | undefined;
      // a placed node may move: its connections (the relay's above all) outlive each range
      const fixedPort = o.listen && hostPort(o.listen).port !== 0;
      const relay = o.relay ? { url: o.relay as string, token: relayToken! } : undefined;
      const tap = fileTap(Deno.env.get("STRATA_SEAM_TAP"));
      const shared = auto && !fixedPort ? await Dialer.connect(relay, tap, logRelay) : undefined;
      // the KV pool of the range loaded last (reported when ready)
      let pool = 0;
      const start = async (range: LayerRange) => {
        let path = localPath!;
        const kvCells = pool = o.kvCells ?? (auto ? settings.kvCells : await nodeDefaultPool(
          manifest ? { model: manifestModel(manifest) } : { modelPath: localPath! },
          { ...settings, range },
          { capBytes, flashAttention },
        ));
        if (manifest) {
          // refused before any of the range's bytes are downloaded
          checkMemoryCap(manifestModel(manifest), { ...settings, kvCells, range }, {
            capBytes,
            flashAttention,
          });
          const shard = await fetchShardFile(o.model, range, {
            tracker: o.tracker,
            relay: relay && { ...relay, peer: shared?.relay?.peer },
          });
          path = shard.path;
          fetched = shard.report.bytesBySource;
        }
        return await startNode({
          name,
          modelPath: path,
          range,
          backend: nativeBackend(o.backend),
          engine: o.engine,
          webgpu: Boolean(o.webgpu),
          memory64: Boolean(o.wasm64),
          // the WASM engine starts a fixed pool of pthread workers
          threads: o.engine === "wasm" ? Math.min(o.threads, WASM_MAX_THREADS) : o.threads,
          kvCells,
          ctxSize: o.ctxSize,
          maxSessions: o.maxSessions,
          batchInvariant: o.batchInvariant !== false,
          batchTokens: o.batchTokens,
          keepAwakeMs: o.keepAwake,
          leaseMs: o.sessionIdleMs,
          cohorts: o.cohorts,
          unusedSessionMs: o.unusedSessionMs,
          prefixCells: o.prefixCells,
          routeKey: key ? await importPublicRouteKey(key) : undefined,
          tracker: o.tracker ? { url: o.tracker, token: trackerToken! } : undefined,
          fault: o.injectFault,
          listen: o.listen ? hostPort(o.listen) : undefined,
          publicUrl: o.publicUrl,
          tls: Boolean(o.tls),
          relay,
          tap,
          manifest,
          serveArtifact: o.serveArtifact ? hostPort(o.serveArtifact) : undefined,
          artifactPublicUrl: o.artifactPublicUrl,
          memoryCapBytes: o.memoryCap,
          onPlace: auto ? (r) => moveTo(layerRange(r.start, r.end, nLayer)) : undefined,
          dialer: shared,
        });
      };
      const first = auto
        ? await placedRange(o.tracker, trackerToken!, {
          node: name,
          artifact: manifest?.artifact ?? await sha256File(localPath!),
          capBytes,
          engine: o.engine === "wasm"
            ? (o.webgpu ? "wasm-webgpu" : "wasm-cpu")
            : `native-${nativeBackend(o.backend)}`,
          flashAttention,
          ...settings,
        }, nLayer)
        : parseLayerRange(o.layers, nLayer);
      let running = await start(first);
      let range = first;
      // a placed node moves: the new range loads (and registers) before the old one goes
      let moving = false;
      moveTo = (next) => {
        if (moving || (next.start === range.start && next.end === range.end)) return;
        moving = true;
        void (async () => {
          try {
            log.info("node moves", { name, from: formatRange(range), to: formatRange(next) });
            // on a fixed port the old one must give it up first
            if (fixedPort) await running.close();
            const old = running;
            running = await start(next);
            range = next;
            // its prefix entries go to a node that keeps the old range (this one brings nothing)
            if (!fixedPort) await drained(old).then(() => old.handOver()).then(() => old.close());
            console.log(
              JSON.stringify({ event: "moved", name, layers: formatRange(next), urls: running.urls }),
            );
          } catch (e) {
            log.error("move failed", { name, error: e instanceof Error ? e.message : String(e) });
          } finally {
            moving = false;
          }
        })();
      };
      // one line a supervisor (or a test) can wait for
      console.log(JSON.stringify({
        event: "ready",
        name,
        layers: formatRange(first),
        urls: running.urls,
        artifact_url: running.artifactUrl || undefined,
        tokens_per_s: running.tokensPerS,
        memory_cap_bytes: running.memoryCapBytes,
        kv_cells: pool,
        fetched_bytes_by_source: fetched,
        pid: Deno.pid,
      }));
      await untilSignal();
      // a few seconds at most: whoever stops a node waits for it
      await running.handOver(3_000);
      await running.close();
      shared?.close();
      Deno.exit(0);
    });
}

/** Resolves once the node serves no session (or after a minute: they are failed then). */
async function drained(n: RunningNode, maxMs = 60_000): Promise<void> {
  for (const t0 = Date.now(); Date.now() - t0 < maxMs;) {
    if (n.node.sessionIds().length === 0) return;
    await new Promise((r) => setTimeout(r, 250));
  }
}
