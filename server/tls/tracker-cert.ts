// A node's TLS certificate from the tracker: a fresh key made here (its private half never
// leaves the process), its public half signed by the network's CA through Certify.
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { certHosts, type CertPair, newTlsKey } from "../../node-apis/tls/certs.ts";
import { trustedCa } from "../../node-apis/tls/trust.ts";

export async function trackerCert(
  tracker: { url: string; token: string },
  node: string,
  /** the host the node's seam URL names, or the host it listens on */
  host: string,
): Promise<CertPair> {
  const ca = trustedCa();
  if (!ca) throw new Error("a node serving TLS checks its peers against the network's CA: give --ca");
  const { key, publicKeyDer } = await newTlsKey();
  const { client, close } = trackerClient(tracker.url);
  try {
    const r = await client.certify(
      { token: tracker.token, node, publicKey: publicKeyDer, hosts: certHosts(host) },
      { timeoutMs: 30_000 },
    );
    if (r.caPem.trim() !== ca.trim()) {
      throw new Error("the tracker's CA is not the one --ca names: its certificate would not be trusted");
    }
    return { cert: r.certPem, key };
  } finally {
    close();
  }
}
