// `strata tracker`: registrations, leases, admission probes and routes.
import { Command, InvalidArgumentError, Option } from "commander";
import { DEFAULT_MODEL } from "../model/default-model.ts";
import { openModelHeader } from "../artifacts/model-header.ts";
import { cacheDir } from "../process/paths.ts";
import { count, hostPort, int, num, publicUrl, untilSignal } from "../cli/options.ts";
import { NODE_CALLS_PER_MIN } from "./call-limits.ts";
import { startTracker } from "./tracker.ts";
import { addCaOption } from "../tls/options.ts";
import { trustCaFile } from "../../node-apis/tls/trust.ts";
import { addSecretOption, needSecret, NODE_TOKEN, RELAY_TOKEN } from "../cli/secrets.ts";

export function trackerCommand(): Command {
  return addSecretOption(
    addSecretOption(addCaOption(new Command("tracker")), NODE_TOKEN, "nodes' registration token"),
    RELAY_TOKEN,
    "the tracker's relay token",
  )
    .description("admit nodes (probe), keep their leases, choose routes and sign their tickets")
    .option(
      "--ca-key <file>",
      "with --ca: the CA's private key (PEM); the tracker serves HTTPS and signs nodes' TLS keys",
    )
    .option(
      "--model <name|path|url>",
      "the model it routes: a name, a GGUF, or an origin's artifact URL (…/artifacts/<sha256>); only its " +
        "header and manifest are read, never a weight",
      DEFAULT_MODEL.name,
    )
    .option(
      "--reference <file|url>",
      "the model's signed probe reference (default: <model>.strata-ref, then the cache; for an artifact " +
        "URL, the origin's <url>/reference)",
    )
    .option("--publisher-key <hex>", "take only a reference signed by this Ed25519 key (raw, hex)")
    .option("--listen <host:port>", "where it listens", "127.0.0.1:7600")
    .option(
      "--public-url <url>",
      "where nodes and gateways reach it, when not --listen (e.g. https://tracker.example.net:7600): " +
        "its certificate names this host",
    )
    .option(
      "--data <dir>",
      "keep its database here (<dir>/tracker.db): admissions and the route key outlive it",
    )
    .option(
      "--db <file|url>",
      "registrations, admissions, the route key and epochs: a SQLite file (one tracker), or a " +
        "postgres://… database that any number of tracker replicas share",
    )
    .option(
      "--sync-ms <n>",
      "replicas: how often heartbeats go to the database and the other replicas' changes come in",
      int("sync-ms"),
    )
    .option(
      "--lease-ms <n>",
      "a node without a heartbeat this long is dropped from routes",
      int("lease-ms"),
      10_000,
    )
    .option(
      "--limit-node-calls-per-min <n>",
      "calls with the node token (register, heartbeat, leave, place, certify) one node name may make a minute; " +
        "past it resource_exhausted (0: no limit)",
      count("limit-node-calls-per-min"),
      NODE_CALLS_PER_MIN,
    )
    .option(
      "--spot-check-ms <n>",
      "how often a serving node gets a spot check that looks like ordinary traffic (0: never)",
      num("spot-check-ms"),
      60_000,
    )
    .option("--relay <ws-url>", "relay for probing nodes reachable only through it")
    .addOption(
      new Option(
        "--seam-compression <policy>",
        "hidden states on routes' seams: none (f32), q8 (blocks of 32), auto (q8 on routes through the relay)",
      )
        .choices(["none", "q8", "auto"]).default("none"),
    )
    .option(
      "--repair-reserve <slots>",
      "session slots on every layer that new sessions leave free, for routes repairing a lost node",
      num("repair-reserve"),
      0,
    )
    .action(async (o) => {
      const token = needSecret(o, NODE_TOKEN);
      const { host, port } = hostPort(o.listen);
      if (o.caKey !== undefined && o.ca === undefined) throw new InvalidArgumentError("--ca-key needs --ca");
      if (o.data !== undefined && o.db !== undefined) {
        throw new InvalidArgumentError("give --data or --db, not both");
      }
      if (o.data !== undefined) await Deno.mkdir(o.data, { recursive: true });
      await trustCaFile(o.ca);
      const model = await openModelHeader(o.model);
      const ca = o.caKey === undefined
        ? undefined
        : { cert: await Deno.readTextFile(o.ca), key: await Deno.readTextFile(o.caKey) };
      const t = await startTracker({
        ca,
        model,
        reference: o.reference,
        publisherKey: o.publisherKey,
        spotCheckMs: o.spotCheckMs,
        db: o.db ?? (o.data !== undefined ? `${o.data}/tracker.db` : cacheDir("tracker.db")),
        syncMs: o.syncMs,
        nodeToken: token,
        leaseMs: o.leaseMs,
        host,
        port,
        publicUrl: o.publicUrl,
        relay: o.relay ? { url: o.relay, token: needSecret(o, RELAY_TOKEN, "--relay: ") } : undefined,
        seamCompression: o.seamCompression,
        repairReserve: o.repairReserve,
        nodeCallsPerMin: o.limitNodeCallsPerMin,
      });
      console.log(JSON.stringify({ event: "ready", url: publicUrl(o.publicUrl, t.url), pid: Deno.pid }));
      await untilSignal();
      await t.close();
      Deno.exit(0);
    });
}
