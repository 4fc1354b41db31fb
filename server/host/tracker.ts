// A Deno node's way to its tracker: the tracker's Connect service (node-apis/tracker/), under
// the node's name and token; and the certificate the tracker signs for the node's TLS seams.
import type { TrackerPort } from "../../src/node/membership.ts";
import { trackerPort } from "../../node-apis/tracker/client.ts";
import type { CertPair } from "../../node-apis/tls/certs.ts";
import { trackerCert } from "../tls/tracker-cert.ts";
import { log } from "../log/log.ts";

export function nodeTracker(tracker: { url: string; token: string }, name: string): TrackerPort {
  return trackerPort(tracker.url, tracker.token, name);
}

/** The node's certificate from its tracker, for the host its seams (or artifact) are reached at. */
export async function nodeCertificate(c: {
  readonly name: string;
  readonly tracker?: { url: string; token: string };
  readonly publicUrl?: string;
  readonly listen?: { host: string };
  readonly serveArtifact?: { host: string };
}): Promise<CertPair> {
  if (!c.tracker) throw new Error("--tls takes its certificate from the tracker: give --tracker");
  if (c.publicUrl && !c.publicUrl.startsWith("https://")) {
    throw new Error(`--tls serves https://: the public URL ${c.publicUrl} says otherwise`);
  }
  const host = c.publicUrl ? new URL(c.publicUrl).hostname : c.listen?.host ?? c.serveArtifact?.host;
  if (host === undefined) throw new Error("--tls serves seams or the artifact: give --listen");
  const cert = await trackerCert(c.tracker, c.name, host);
  log.debug("tls certificate", { node: c.name, host });
  return cert;
}
