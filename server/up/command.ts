// `strata up`: the whole local network in one command.
import { cutRule } from "../../src/gguf/cut-points.ts";
import { Command, InvalidArgumentError } from "commander";
import { evenSplit, formatRange, parseLayerRange, parseSplit } from "../../src/engine/layer-range.ts";
import { ensureNativeLibrary } from "../build/native.ts";
import { CATALOG, catalogModel, DEFAULT_MODEL } from "../model/default-model.ts";
import { fileFacts } from "../model/facts.ts";
import { resolveModel } from "../model/fetch.ts";
import { upStateFile } from "../gateway/command.ts";
import {
  backendOption,
  count,
  int,
  MEMORY_SIZE_HELP,
  memorySize,
  nativeBackend,
  untilSignal,
} from "../cli/options.ts";
import { up } from "./up.ts";
import { DEFAULT_REQUEST_QUEUE } from "../../src/gateway/request-queue.ts";
import { addClientLimitOptions, clientLimitsOf } from "../gateway/limit-options.ts";

const collect = (v: string, all: string[] = []) => [...all, v];

export function upCommand(): Command {
  return addClientLimitOptions(new Command("up"))
    .description("start a relay, a tracker, routes of shard nodes and a gateway; Ctrl-C stops them")
    .option(
      "--model <name|path>",
      `a catalog model (${CATALOG.map((m) => m.name).join(", ")}) or a GGUF path`,
      DEFAULT_MODEL.name,
    )
    .option(
      "--split <ranges>",
      `layer ranges of one route (default: the catalog model's, ${DEFAULT_MODEL.split} for ${DEFAULT_MODEL.name})`,
    )
    .option("--nodes <n>", "cut the model into n even ranges instead", int("nodes"))
    .option(
      "--tls",
      "TLS everywhere: seams, relay (wss://), tracker and gateway (https://), with a CA made for this network",
    )
    .option("--routes <n>", "complete routes (the tracker spreads requests over them)", int("routes"), 1)
    .addOption(backendOption())
    .option(
      "--threads <n>",
      "engine threads per node (default: this machine's cores shared evenly by the nodes it starts)",
      int("threads"),
    )
    .option("--port <n>", "gateway port (0: any free port)", (v) => Number(v), 8080)
    .option(
      "--listen <host>",
      "the address every part binds to and advertises: this machine's LAN address lets the LAN reach the " +
        "network (default 127.0.0.1)",
      "127.0.0.1",
    )
    .option(
      "--data <dir>",
      "keep the tracker's database, the node token, the relay secret and the TLS files here across restarts " +
        "(default: a temporary folder, removed on exit)",
    )
    .option("--api-key <key>", "require this bearer key at the gateway (repeatable)", collect)
    .option("--cors <origins>", "browser origins that may call the gateway's API (comma-separated, or *)")
    .option("--lease-ms <n>", "node lease at the tracker", int("lease-ms"), 5000)
    .option(
      "--max-sessions <n>",
      "concurrent Route Sessions per node (the node's default: 16)",
      int("max-sessions"),
    )
    .option(
      "--kv-cells <n>",
      "KV cells of each node's pool (the node's default: room for every session to hold 4096 tokens)",
      int("kv-cells"),
    )
    .option(
      "--ctx-size <n>",
      "most tokens one session may hold (the node's default: the model's trained context)",
      int("ctx-size"),
    )
    .option(
      "--unused-session-ms <n>",
      "nodes let a session go that was opened and given no step this long (the node's default: 120000)",
      int("unused-session-ms"),
    )
    .option(
      "--repair-reserve <slots>",
      "session slots on every layer that new sessions leave free for repairs (default 0)",
      int("repair-reserve"),
    )
    .option(
      "--repair-deadline-ms <n>",
      "how long a repair waits for a route to take over from one that lost a node",
      int("repair-deadline-ms"),
    )
    .option(
      "--prefix-cells <n>",
      "KV cells each node keeps as prefix entries for the prompts that extend them (0: none; the node's default: half its pool)",
      count("prefix-cells"),
    )
    .option("--no-prefix-reuse", "the gateway prefills every prompt whole (to compare)")
    .option(
      "--kv-mirror <n>",
      "the gateway sends the KV of prompts of at least <n> positions to standby nodes, for repairs (0: off)",
      count("kv-mirror"),
      0,
    )
    .option(
      "--no-repair-resume",
      "repairs re-prefill the whole new route instead of rebuilding only the lost hop (to compare)",
    )
    .option(
      "--no-batch-invariant",
      "nodes keep their KV pools in any order and run the fastest kernels (faster prefill where the CPU has AMX), but a greedy answer may change with load",
    )
    .option(
      "--queue-max <n>",
      "requests the gateway lets wait while every route is busy; past it 429",
      int("queue-max"),
      DEFAULT_REQUEST_QUEUE.maxWaiting,
    )
    .option(
      "--queue-timeout-ms <n>",
      "the longest a request waits at the gateway for a busy route before 429",
      int("queue-timeout-ms"),
      DEFAULT_REQUEST_QUEUE.timeoutMs,
    )
    .option(
      "--browser-shard <a:b>",
      "host this range of the split in a headless Chromium tab on the volunteer page (needs chromium)",
    )
    .option(
      "--wasm-shard <a:b>",
      "run this range of the split on the WASM engine in Deno (repeatable)",
      collect,
    )
    .option(
      "--memory-cap <size>",
      `no split: cap every participant at this (${MEMORY_SIZE_HELP}) and let the tracker place them all, ` +
        "starting as many native nodes as the model needs",
      memorySize,
    )
    .option(
      "--browser-shards <n>",
      "with --memory-cap: this many headless tabs among them",
      int("browser-shards"),
    )
    .option(
      "--wasm-shards <n>",
      "with --memory-cap: this many Deno WASM nodes among them",
      int("wasm-shards"),
    )
    .action(async (o) => {
      if (o.memoryCap === undefined && (o.browserShards || o.wasmShards)) {
        throw new InvalidArgumentError("--browser-shards and --wasm-shards go with --memory-cap");
      }
      if (
        o.memoryCap !== undefined && (o.split || o.nodes || o.browserShard || o.wasmShard || o.routes > 1)
      ) {
        throw new InvalidArgumentError(
          "--memory-cap places every node: not with --split, --nodes, --routes or a shard range",
        );
      }
      const { path, name } = await resolveModel(o.model);
      const backend = nativeBackend(o.backend);
      await ensureNativeLibrary(backend);
      const facts = await fileFacts(path);
      // placed (--memory-cap): no split
      const split = o.memoryCap !== undefined
        ? []
        : o.nodes
        ? evenSplit(facts.nLayer, o.nodes, cutRule(facts.header))
        : parseSplit(
          o.split ?? (catalogModel(o.model) ?? DEFAULT_MODEL).split,
          facts.nLayer,
          cutRule(facts.header),
        );
      const inSplit = (text: string, flag: string) => {
        const r = parseLayerRange(text, facts.nLayer);
        if (!split.some((s) => s.start === r.start && s.end === r.end)) {
          throw new InvalidArgumentError(
            `${flag} ${text} is not one of the split's ranges (${split.map(formatRange)})`,
          );
        }
        return r;
      };
      const browserShard = o.browserShard ? inSplit(o.browserShard, "--browser-shard") : undefined;
      const wasmShards = ((o.wasmShard ?? []) as string[]).map((w) => inSplit(w, "--wasm-shard"));
      if (["0.0.0.0", "::", "[::]"].includes(o.listen)) {
        throw new InvalidArgumentError(
          `--listen ${o.listen}: every part advertises this address to the others; give one they can reach (e.g. this machine's LAN address)`,
        );
      }
      const dir = o.data ?? await Deno.makeTempDir({ prefix: "strata-up-" });
      Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
      // kept with --data: a restarted network keeps its token and secret (nodes that joined by hand too)
      const kept = (name: string, env: string) =>
        Deno.env.get(env) ?? (o.data ? keptSecret(`${dir}/${name}`) : undefined);
      // the machine's cores, shared by the engines started here (a placed network: at least 2)
      const engines = Math.max(2, o.routes * split.length);
      const threads: number = o.threads ?? Math.max(1, Math.floor(navigator.hardwareConcurrency / engines));
      const placed = o.memoryCap === undefined
        ? undefined
        : { capBytes: o.memoryCap, tabs: o.browserShards ?? 0, wasm: o.wasmShards ?? 0 };
      console.error(
        placed
          ? `strata up: ${name}, every participant under ${
            (o.memoryCap / 2 ** 20).toFixed(0)
          } MiB, placed by the tracker`
          : `strata up: ${name}, ${o.routes} route(s) of ${split.length} nodes`,
      );
      const net = await up({
        model: o.model,
        split,
        routes: o.routes,
        backend,
        threads,
        gatewayListen: `${o.listen}:${o.port}`,
        listenHost: o.listen,
        // reached from other machines: the tracker and the relay at their usual ports
        ...(o.listen === "127.0.0.1" ? {} : { trackerPort: 7600, relayPort: 7700 }),
        apiKeys: o.apiKey ?? [],
        corsOrigins: o.cors
          ? String(o.cors).split(",").map((x: string) => x.trim()).filter(Boolean)
          : undefined,
        leaseMs: o.leaseMs,
        maxSessions: o.maxSessions,
        kvCells: o.kvCells,
        ctxSize: o.ctxSize,
        unusedSessionMs: o.unusedSessionMs,
        repairReserve: o.repairReserve,
        repairDeadlineMs: o.repairDeadlineMs,
        repairResume: o.repairResume !== false,
        prefixReuse: o.prefixReuse !== false,
        kvMirror: o.kvMirror,
        prefixCells: o.prefixCells,
        batchInvariant: o.batchInvariant !== false,
        admission: { maxWaiting: o.queueMax, timeoutMs: o.queueTimeoutMs },
        clientLimits: clientLimitsOf(o),
        dbPath: `${dir}/tracker.db`,
        // set it (or keep it with --data) to let more nodes join this network by hand
        nodeToken: kept("node-token", "STRATA_NODE_TOKEN"),
        relaySecret: kept("relay-secret", "STRATA_RELAY_SECRET"),
        progress: (what) => console.error(`  ${what}`),
        browserShard,
        wasmShards,
        placed,
        tlsDir: o.tls ? dir : undefined,
      });
      const state = {
        event: "ready",
        gateway: net.gateway,
        tracker: net.tracker,
        tracker_pid: net.pid("tracker"),
        gateway_pid: net.pid("gateway"),
        relay: net.relay,
        // the network's CA, for clients of a --tls network (`strata chat` reads it here)
        ca: o.tls ? `${dir}/ca.pem` : undefined,
        model: name,
        nodes: net.nodes.map((n) => ({
          name: n.name,
          layers: n.layers,
          route: n.route,
          url: n.url,
          pid: n.process.child.pid,
        })),
        browser: net.browser ? await net.browser.state() : undefined,
        // placed tabs: where the tracker put each
        tabs: placed
          ? await Promise.all(net.tabs.map(async (t) => {
            const s = await t.state();
            const r = s.assignment?.range;
            return { name: s.name, layers: r ? `${r.start}:${r.end}` : "", engine: s.engine };
          }))
          : undefined,
      };
      await Deno.writeTextFile(upStateFile(), JSON.stringify(state));
      console.log(JSON.stringify(state));
      console.error(`  gateway  ${net.gateway}/v1  (try: ./strata chat "Hello!"); Ctrl-C stops everything`);
      const sig = await untilSignal();
      console.error(`strata up: ${sig}, stopping`);
      await net.stop();
      await Deno.remove(upStateFile()).catch(() => {});
      // --data stays: the next start takes up where this one stopped
      if (!o.data) await Deno.remove(dir, { recursive: true }).catch(() => {});
      Deno.exit(0);
    });
}

/** A secret kept in a file (made once, readable by its owner only). */
function keptSecret(path: string): string {
  try {
    return Deno.readTextFileSync(path).trim();
  } catch {
    const s = crypto.randomUUID();
    Deno.writeTextFileSync(path, s + "\n", { mode: 0o600 });
    return s;
  }
}
