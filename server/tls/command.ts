// `strata tls ca`: a network's CA (for the tracker's --ca/--ca-key, everyone else's --ca);
// `strata tls issue`: a certificate from it for a relay or a gateway (nodes ask the tracker).
import { Command } from "commander";
import { certifiedPair, describeCert, newNetworkCa, openNetworkCa } from "../../node-apis/tls/certs.ts";

async function writeSecret(path: string, text: string): Promise<void> {
  await Deno.writeTextFile(path, text, { mode: 0o600, createNew: true });
}

export function tlsCommand(): Command {
  const tls = new Command("tls").description("the network's own certificates (see docs/security.md)");
  tls.command("ca")
    .description(
      "make a network's CA: <dir>/ca.pem (give it to everyone) and <dir>/ca-key.pem (the tracker's)",
    )
    .requiredOption("--out <dir>", "where to write them (existing files are not replaced)")
    .option("--name <name>", "the CA's name", "strata network")
    .action(async (o) => {
      await Deno.mkdir(o.out, { recursive: true });
      const ca = await newNetworkCa(o.name);
      await writeSecret(`${o.out}/ca-key.pem`, ca.key);
      await Deno.writeTextFile(`${o.out}/ca.pem`, ca.cert, { createNew: true });
      console.log(JSON.stringify({ ca: `${o.out}/ca.pem`, ca_key: `${o.out}/ca-key.pem` }));
    });
  tls.command("issue")
    .description("a key and a certificate from the CA, for a relay or a gateway: <out>.pem and <out>-key.pem")
    .requiredOption("--ca <file>", "the CA's certificate")
    .requiredOption("--ca-key <file>", "the CA's private key")
    .requiredOption("--host <host...>", "the host names and IP addresses it is reached at")
    .requiredOption("--out <prefix>", "where to write them (existing files are not replaced)")
    .option("--name <name>", "the name in the certificate", "strata")
    .action(async (o) => {
      const ca = await openNetworkCa({
        cert: await Deno.readTextFile(o.ca),
        key: await Deno.readTextFile(o.caKey),
      });
      const pair = await certifiedPair(ca, o.name, o.host);
      await writeSecret(`${o.out}-key.pem`, pair.key);
      await Deno.writeTextFile(`${o.out}.pem`, pair.cert, { createNew: true });
      const d = describeCert(pair.cert);
      console.log(JSON.stringify({
        cert: `${o.out}.pem`,
        key: `${o.out}-key.pem`,
        hosts: d.hosts,
        not_after: d.notAfter.toISOString(),
      }));
    });
  return tls;
}
