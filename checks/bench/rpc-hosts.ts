// llama.cpp RPC across test hosts, as the route runs across them in hosts.ts: each rpc-server
// in its own network namespace behind a delay link, llama-server in the root namespace dialing
// them over the bridge. Every round trip it makes to a server pays the link delay both ways.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { ensureRpcTools } from "../../server/build/rpc.ts";
import type { ServiceProcess } from "../../server/process/service-process.ts";
import { INNER, PUBLIC_PORT, setLinkDelay, startHostLink } from "../hosts/network.ts";
import { createHosts, type Host } from "../hosts/netns.ts";
import { type RpcDriver, rpcServerArgs, startRpcDriver } from "./measure-rpc.ts";
import { figures } from "./figures.ts";

export interface RpcHostsRun {
  readonly delay_ms: number;
  readonly decode_tps: number;
  readonly p50_ms: number;
}

/** Waits until the host's rpc-server listens on its loopback (its link accepts before that). */
async function listening(h: Host, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  const port = `:${INNER.split(":")[1]} `;
  while (Date.now() < until) {
    const out = await new Deno.Command("ip", {
      args: ["netns", "exec", h.netns, "ss", "-ltnH"],
      stdout: "piped",
      stderr: "null",
    }).output();
    if (new TextDecoder().decode(out.stdout).includes(port)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`rpc-server on ${h.name} not listening within ${timeoutMs / 1000} s`);
}

export async function rpcAcrossHosts(o: {
  modelPath: string;
  split: readonly LayerRange[];
  threads: number;
  delays: readonly number[];
  promptTokens: number;
  decodeTokens: number;
}): Promise<RpcHostsRun[]> {
  const tools = await ensureRpcTools();
  const net = await createHosts(o.split.map((_, i) => `rpc${i}`));
  const dir = await Deno.makeTempDir({ prefix: "strata-rpc-hosts-" });
  const delayFile = `${dir}/delay-ms`;
  await Deno.writeTextFile(delayFile, "0");
  const links: ServiceProcess[] = [];
  const servers: Deno.ChildProcess[] = [];
  let driver: RpcDriver | undefined;
  try {
    const [host, port] = INNER.split(":");
    for (const h of net.hosts) {
      links.push(await startHostLink(h, delayFile));
      // `ip netns exec` execs: the child's pid is the server's own
      servers.push(
        new Deno.Command("ip", {
          args: ["netns", "exec", h.netns, ...rpcServerArgs(tools, host, Number(port), o.threads)],
          stdin: "null",
          stdout: "null",
          stderr: "null",
        }).spawn(),
      );
    }
    for (const h of net.hosts) await listening(h);
    driver = await startRpcDriver(tools, net.hosts.map((h) => `${h.ip}:${PUBLIC_PORT}`), o);
    const runs: RpcHostsRun[] = [];
    for (const [i, d] of o.delays.entries()) {
      await setLinkDelay(links, delayFile, d);
      // the first run warms up; later ones only change the delay
      const { ttft, stepMs } = await driver.measure(i === 0);
      const f = figures(o.promptTokens, ttft, stepMs, 0);
      runs.push({ delay_ms: d, decode_tps: f.decode_tps, p50_ms: f.p50_ms });
    }
    return runs;
  } finally {
    await driver?.close();
    for (const s of servers) {
      try {
        s.kill("SIGTERM");
      } catch { /* gone */ }
    }
    await Promise.all(servers.map((s) => s.status));
    for (const l of links) await l.stop(5000);
    await net.destroy();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
