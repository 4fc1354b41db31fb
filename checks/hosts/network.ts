// A Strata network across test hosts: relay, tracker, gateway and each shard node in its own
// network namespace with its own address, every service behind a delay link on its host's
// address (so each crossing between hosts costs the link delay once, both ways). The
// harness (in the root namespace) reaches them over the bridge.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { peerToken } from "../../src/relay/token.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { resolveModel } from "../../server/model/fetch.ts";
import { ensureReference } from "../../server/model/reference-file.ts";
import { waitAdmitted } from "../../server/up/plane.ts";
import { trackedNodeArgs } from "../../server/up/node-args.ts";
import { createHosts, type Host } from "./netns.ts";

export interface HostNetworkOptions {
  readonly model: string;
  readonly split: readonly LayerRange[];
  readonly threads: number;
  readonly delayMs: number;
}

export interface HostNetwork {
  readonly gateway: string;
  readonly tracker: string;
  readonly relay: string;
  readonly hosts: Host[];
  /** one-way delay of every link from now on */
  setDelay(ms: number): Promise<void>;
  stop(): Promise<void>;
}

/** where a host's service listens (its loopback), and where its delay link listens (its address) */
export const INNER = "127.0.0.1:7001";
export const PUBLIC_PORT = 7000;

/** A host's delay link: on its address, forwarding each connection to its service on INNER. */
export function startHostLink(h: Host, delayFile: string): Promise<ServiceProcess> {
  return ServiceProcess.start(
    `${h.name} link`,
    ["hosts", "link", "--listen", `${h.ip}:${PUBLIC_PORT}`, "--to", INNER, "--delay-file", delayFile],
    {},
    30_000,
    h.netns,
  );
}

/** Every link's one-way delay from now on (the links reread the file on SIGHUP). */
export async function setLinkDelay(
  links: readonly ServiceProcess[],
  delayFile: string,
  ms: number,
): Promise<void> {
  await Deno.writeTextFile(delayFile, String(ms));
  for (const l of links) l.child.kill("SIGHUP");
  await new Promise((r) => setTimeout(r, 200));
}

export async function startHostNetwork(o: HostNetworkOptions): Promise<HostNetwork> {
  const names = ["relay", "tracker", "gateway", ...o.split.map((_, i) => `n${i}`)];
  const net = await createHosts(names);
  const host = (name: string) => net.hosts.find((h) => h.name === name)!;
  const dir = await Deno.makeTempDir({ prefix: "strata-hosts-" });
  const delayFile = `${dir}/delay-ms`;
  await Deno.writeTextFile(delayFile, String(o.delayMs));
  const procs: ServiceProcess[] = [];
  const links: ServiceProcess[] = [];
  const stop = async () => {
    for (const p of [...procs, ...links].reverse()) await p.stop(5000);
    await net.destroy();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  /**
   * The link on the host's address first (it dials the service per connection), then the
   * service on the host's loopback: a node registers as it starts, and the tracker's probe
   * must find the link already there.
   */
  const serve = async (name: string, args: string[], env: Record<string, string> = {}) => {
    const h = host(name);
    links.push(await startHostLink(h, delayFile));
    procs.push(await ServiceProcess.start(name, args, env, 300_000, h.netns));
    return `${h.ip}:${PUBLIC_PORT}`;
  };
  try {
    const secret = crypto.randomUUID();
    const nodeToken = crypto.randomUUID();
    const relay = `ws://${await serve("relay", ["relay", "--listen", INNER], {
      STRATA_RELAY_SECRET: secret,
    })}`;
    const tracker = `http://${await serve("tracker", [
      "tracker",
      "--model",
      o.model,
      "--reference",
      await ensureReference((await resolveModel(o.model)).path, { backend: "cpu" }),
      "--listen",
      INNER,
      "--db",
      `${dir}/tracker.db`,
      "--lease-ms",
      "5000",
      "--relay",
      relay,
    ], { STRATA_NODE_TOKEN: nodeToken, STRATA_RELAY_TOKEN: await peerToken(secret, "tracker") })}`;
    for (const [i, range] of o.split.entries()) {
      const name = `n${i}`;
      const node = await trackedNodeArgs({
        model: o.model,
        range,
        name,
        tracker,
        nodeToken,
        listen: INNER,
        relay,
        relaySecret: secret,
        threads: o.threads,
      });
      await serve(name, [...node.args, "--public-url", `http://${host(name).ip}:${PUBLIC_PORT}`], node.env);
    }
    await waitAdmitted(tracker, o.split.length);
    const gateway = `http://${await serve("gateway", [
      "gateway",
      "--model",
      o.model,
      "--tracker",
      tracker,
      "--listen",
      INNER,
      "--relay",
      relay,
    ], { STRATA_RELAY_TOKEN: await peerToken(secret, "gateway") })}`;
    return {
      gateway,
      tracker,
      relay,
      hosts: net.hosts,
      setDelay: (ms: number) => setLinkDelay(links, delayFile, ms),
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
