// Whom this process trusts on https:// and wss:// URLs: the network's CA when `--ca` names
// one (certificates it signed, and no other), else the system's roots (public certificates).
let networkCa: string | undefined;

/** From now on, TLS peers must present a certificate the network's CA signed. */
export function trustNetworkCa(pem: string): void {
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new Error("the CA file holds no PEM certificate");
  networkCa = pem;
}

/** Reads the network's CA certificate from `path` and trusts it (nothing when no path is given). */
export async function trustCaFile(path: string | undefined): Promise<void> {
  if (path !== undefined) trustNetworkCa(await Deno.readTextFile(path));
}

/** The CA certificate (PEM) peers' certificates are checked against, if one was given. */
export const trustedCa = (): string | undefined => networkCa;

/** Options for a Node TLS client (node:http2, ws): the network's CA when one is trusted. */
export const nodeTlsOptions = (): { ca?: string } => networkCa ? { ca: networkCa } : {};

/** `fetch` that checks https:// origins against the network's CA when one is trusted. */
export function trustedFetch(): typeof fetch {
  if (!networkCa) return fetch;
  const client = Deno.createHttpClient({ caCerts: [networkCa] });
  return (input, init) => fetch(input, { ...init, client } as RequestInit & { client: Deno.HttpClient });
}
