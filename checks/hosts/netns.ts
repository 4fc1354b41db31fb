// Test hosts on one machine: a network namespace per host, each with its own address on
// one bridge (in a switch namespace of its own), and the root namespace on the bridge too
// so the harness can reach them. Needs root and iproute2; everything is removed on destroy.
import { runCommand } from "../../server/process/run.ts";

export interface Host {
  readonly name: string;
  readonly netns: string;
  readonly ip: string;
  /** its end of the veth to the bridge (deleting it cuts the host off) */
  readonly dev: string;
}

export interface Hosts {
  readonly hosts: Host[];
  /** the root namespace's address on the bridge */
  readonly rootIp: string;
  destroy(): Promise<void>;
}

const ip = (...args: string[]) => runCommand("ip", args);

/** Whether this process may create namespaces (root with iproute2), and why not. */
export async function canMakeHosts(): Promise<string | undefined> {
  if (Deno.uid() !== 0) return "network namespaces need root";
  try {
    await ip("netns", "list");
  } catch {
    return "no iproute2 (apt-get install iproute2)";
  }
  return undefined;
}

/** What `ip` prints. */
async function ipOut(...args: string[]): Promise<string> {
  const out = await new Deno.Command("ip", { args, stdout: "piped", stderr: "null" }).output();
  return new TextDecoder().decode(out.stdout);
}

/**
 * Removes the hosts of an earlier run that was killed before it could (no process left in
 * any of them): their bridge address in the root namespace is on the same subnet, and two
 * routes to it send this run's traffic astray.
 */
async function sweepStale(): Promise<void> {
  const groups = new Map<string, string[]>();
  for (const line of (await ipOut("netns", "list")).split("\n")) {
    const m = /^(strata-[\w-]+-(\d+))\b/.exec(line);
    if (m) groups.set(m[2], [...groups.get(m[2]) ?? [], m[1]]);
  }
  for (const [tag, spaces] of groups) {
    const busy = await Promise.all(
      spaces.map(async (ns) => (await ipOut("netns", "pids", ns)).trim() !== ""),
    );
    if (busy.some(Boolean)) continue;
    for (const ns of spaces) await removeNamespace(ns);
    await ip("link", "del", `sr${tag}`).catch(() => {});
  }
}

/** A namespace and the files `ip netns exec` binds into it (/etc/netns/<ns>: its own hosts file). */
async function removeNamespace(ns: string): Promise<void> {
  await ip("netns", "del", ns).catch(() => {});
  await Deno.remove(`/etc/netns/${ns}`, { recursive: true }).catch(() => {});
}

/** Gives a host its own /etc/hosts: these names at these addresses. */
export async function setHostNames(h: Host, names: ReadonlyArray<readonly [string, string]>): Promise<void> {
  const etc = `/etc/netns/${h.netns}`;
  await Deno.mkdir(etc, { recursive: true });
  await Deno.writeTextFile(
    `${etc}/hosts`,
    `127.0.0.1 localhost\n${names.map(([name, addr]) => `${addr} ${name}`).join("\n")}\n`,
  );
}

export async function createHosts(names: string[], subnet = "10.213.0"): Promise<Hosts> {
  await sweepStale();
  const tag = String(Deno.pid % 10000);
  const sw = `strata-sw-${tag}`;
  const made: string[] = [];
  const destroy = async () => {
    for (const ns of made.reverse()) await removeNamespace(ns);
    await ip("link", "del", `sr${tag}`).catch(() => {});
  };
  try {
    await ip("netns", "add", sw);
    made.push(sw);
    await ip("-n", sw, "link", "add", "br0", "type", "bridge");
    await ip("-n", sw, "link", "set", "br0", "up");
    const attach = async (ns: string | undefined, dev: string, addr: string) => {
      const peer = `${dev}p`;
      await ip("link", "add", dev, "type", "veth", "peer", "name", peer);
      await ip("link", "set", peer, "netns", sw);
      await ip("-n", sw, "link", "set", peer, "master", "br0");
      await ip("-n", sw, "link", "set", peer, "up");
      if (ns) await ip("link", "set", dev, "netns", ns);
      const where = ns ? ["-n", ns] : [];
      await ip(...where, "addr", "add", `${addr}/24`, "dev", dev);
      await ip(...where, "link", "set", dev, "up");
    };
    const hosts: Host[] = [];
    for (const [i, name] of names.entries()) {
      const ns = `strata-${name}-${tag}`;
      await ip("netns", "add", ns);
      made.push(ns);
      await ip("-n", ns, "link", "set", "lo", "up");
      const addr = `${subnet}.${i + 1}`;
      await attach(ns, `sh${tag}${i}`, addr);
      hosts.push({ name, netns: ns, ip: addr, dev: `sh${tag}${i}` });
    }
    const rootIp = `${subnet}.254`;
    await attach(undefined, `sr${tag}`, rootIp);
    return { hosts, rootIp, destroy };
  } catch (e) {
    await destroy();
    throw e;
  }
}
