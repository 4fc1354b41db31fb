// `strata up --tls`: a CA made for this network alone, the relay's and the gateway's
// certificates from it (files the processes read), and what each process is told. Nodes get
// theirs from the tracker, which holds the CA key.
import { certifiedPair, newNetworkCa, openNetworkCa } from "../../node-apis/tls/certs.ts";
import { trustNetworkCa } from "../../node-apis/tls/trust.ts";
import { certFileArgs } from "../tls/options.ts";

/** Paths of the network's TLS files. */
export interface NetworkTls {
  readonly ca: string;
  readonly caKey: string;
  readonly relay: { cert: string; key: string };
  readonly gateway: { cert: string; key: string };
}

/** Makes the files under `dir` (hosts: where the relay and the gateway listen) and trusts the CA here. */
export async function makeNetworkTls(
  dir: string,
  hosts: { relay: string; gateway: string },
): Promise<NetworkTls> {
  // a CA kept in `dir` (strata up --data) stays the network's: certificates it signed stay good
  const kept = await readPair(`${dir}/ca.pem`, `${dir}/ca-key.pem`);
  const pair = kept ?? await newNetworkCa();
  const ca = await openNetworkCa(pair);
  const write = async (name: string, text: string) => {
    const path = `${dir}/${name}`;
    await Deno.writeTextFile(path, text, { mode: 0o600 });
    return path;
  };
  const served = async (name: string, host: string) => {
    const p = await certifiedPair(ca, name, [host]);
    return { cert: await write(`${name}.pem`, p.cert), key: await write(`${name}-key.pem`, p.key) };
  };
  const files = {
    ca: await write("ca.pem", pair.cert),
    caKey: await write("ca-key.pem", pair.key),
    relay: await served("relay", hosts.relay),
    gateway: await served("gateway", hosts.gateway),
  };
  // `strata up` itself asks the tracker when nodes are admitted
  trustNetworkCa(pair.cert);
  return files;
}

/** What each process of the network is told (nothing without TLS). */
export function tlsArgs(
  tls: NetworkTls | undefined,
  role: "tracker" | "relay" | "node" | "gateway",
): string[] {
  if (!tls) return [];
  switch (role) {
    case "tracker":
      return ["--ca", tls.ca, "--ca-key", tls.caKey];
    case "relay":
      return certFileArgs(tls.relay);
    case "node":
      return ["--ca", tls.ca, "--tls"];
    case "gateway":
      return ["--ca", tls.ca, ...certFileArgs(tls.gateway)];
  }
}

async function readPair(cert: string, key: string): Promise<{ cert: string; key: string } | undefined> {
  try {
    return { cert: await Deno.readTextFile(cert), key: await Deno.readTextFile(key) };
  } catch {
    return undefined;
  }
}
