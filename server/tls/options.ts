// TLS as command options. Every command that dials takes `--ca` (the network's trust anchor);
// servers take a certificate from files (`--tls-cert`/`--tls-key`, e.g. a public one for a
// gateway browsers reach) or, for nodes, `--tls`: a certificate the tracker signs.
import type { Command } from "commander";
import type { CertPair } from "../../node-apis/tls/certs.ts";
import { trustCaFile } from "../../node-apis/tls/trust.ts";

export function addCaOption(c: Command): Command {
  return c.option(
    "--ca <file>",
    "the network's CA certificate (PEM): https:// and wss:// peers must present a certificate it signed",
  );
}

export function addCertFileOptions(c: Command, serves: string): Command {
  return c
    .option("--tls-cert <file>", `serve ${serves} over TLS with this certificate (PEM; with --tls-key)`)
    .option("--tls-key <file>", "the certificate's private key (PEM)");
}

/** Trusts `--ca` (when given) and reads `--tls-cert`/`--tls-key` (both or neither). */
export async function tlsOf(
  o: { ca?: string; tlsCert?: string; tlsKey?: string },
): Promise<CertPair | undefined> {
  await trustCaFile(o.ca);
  if ((o.tlsCert === undefined) !== (o.tlsKey === undefined)) {
    throw new Error("give --tls-cert and --tls-key together");
  }
  if (o.tlsCert === undefined || o.tlsKey === undefined) return undefined;
  return { cert: await Deno.readTextFile(o.tlsCert), key: await Deno.readTextFile(o.tlsKey) };
}

/** The options again, for a process `strata up` starts: its files under `dir`. */
export function certFileArgs(files: { cert: string; key: string }): string[] {
  return ["--tls-cert", files.cert, "--tls-key", files.key];
}
