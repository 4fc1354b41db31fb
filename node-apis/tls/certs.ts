// X.509 for the network's own TLS: a CA the tracker holds, and certificates it signs for the
// keys of nodes, relays and gateways (ECDSA P-256: rustls, OpenSSL and browsers all take it).
import "reflect-metadata"; // @peculiar/x509's dependency injection needs it loaded first
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(crypto);

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY_MS = 86_400_000;
/** a participant's certificate outlives any one run of it; it certifies again when it restarts */
const LEAF_DAYS = 30;
const CA_DAYS = 3650;
/** clocks of independently owned machines disagree: certificates start an hour back */
const SKEW_MS = 3_600_000;

/** A certificate and its private key, PEM. */
export interface CertPair {
  readonly cert: string;
  readonly key: string;
}

/** The network's CA: its certificate, and its key for signing others'. */
export interface NetworkCa {
  readonly cert: string;
  readonly subject: string;
  readonly signingKey: CryptoKey;
}

/** A fresh CA for one network. */
export async function newNetworkCa(name = "strata network"): Promise<CertPair> {
  const keys = await newKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${cnSafe(name)}`,
    ...validity(CA_DAYS),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: cert.toString("pem"), key: await keyPem(keys.privateKey) };
}

/** The CA from its PEM files' text; the key must be the certificate's. */
export async function openNetworkCa(pair: CertPair): Promise<NetworkCa> {
  const cert = new x509.X509Certificate(pair.cert);
  if (!cert.getExtension(x509.BasicConstraintsExtension)?.ca) {
    throw new Error("the CA certificate is not a CA's (basic constraints)");
  }
  const der = x509.PemConverter.decodeFirst(pair.key);
  const signingKey = await crypto.subtle.importKey("pkcs8", der, ALG, false, ["sign"]);
  // a signature by the key, checked with the certificate's public key
  const probe = new TextEncoder().encode("strata ca key check");
  const sig = await crypto.subtle.sign(ALG, signingKey, probe);
  const pub = await cert.publicKey.export(ALG, ["verify"]);
  if (!await crypto.subtle.verify(ALG, pub, sig, probe)) {
    throw new Error("the CA key does not match the CA certificate");
  }
  return { cert: pair.cert, subject: cert.subject, signingKey };
}

/**
 * A certificate for `publicKey` (DER SubjectPublicKeyInfo) naming `name` and the hosts it is
 * reached at (IP addresses and DNS names), for serving and for dialing.
 */
export async function issueCert(
  ca: NetworkCa,
  publicKeyDer: Uint8Array,
  name: string,
  hosts: readonly string[],
): Promise<string> {
  if (hosts.length === 0) throw new Error("a certificate names at least one host");
  const publicKey = await crypto.subtle.importKey("spki", bytes(publicKeyDer), ALG, true, ["verify"]);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${cnSafe(name)}`,
    issuer: ca.subject,
    ...validity(LEAF_DAYS),
    signingKey: ca.signingKey,
    publicKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.SubjectAlternativeNameExtension(hosts.map(sanOf)),
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([
        x509.ExtendedKeyUsage.serverAuth,
        x509.ExtendedKeyUsage.clientAuth,
      ]),
    ],
  });
  return cert.toString("pem");
}

/** A participant's TLS key: the private half (PEM) for serving, the public half (DER) to certify. */
export async function newTlsKey(): Promise<{ key: string; publicKeyDer: Uint8Array }> {
  const keys = await newKeys();
  return {
    key: await keyPem(keys.privateKey),
    publicKeyDer: new Uint8Array(await crypto.subtle.exportKey("spki", keys.publicKey)),
  };
}

/** A key and its certificate in one step, for a process that holds the CA (the tracker, `strata up`). */
export async function certifiedPair(
  ca: NetworkCa,
  name: string,
  hosts: readonly string[],
): Promise<CertPair> {
  const { key, publicKeyDer } = await newTlsKey();
  return { cert: await issueCert(ca, publicKeyDer, name, hosts), key };
}

/** The hosts a certificate for a server listening on `host` names: a wildcard address means
 *  the machine's own names and loopback. */
export function certHosts(host: string): string[] {
  const h = host.replace(/^\[|\]$/g, "");
  if (h !== "0.0.0.0" && h !== "::") return [h];
  return [...new Set(["127.0.0.1", "::1", "localhost", Deno.hostname()])];
}

/** What a certificate says, for logs and tests. */
export function describeCert(
  pem: string,
): { subject: string; issuer: string; hosts: string[]; notAfter: Date } {
  const c = new x509.X509Certificate(pem);
  const san = c.getExtension(x509.SubjectAlternativeNameExtension);
  return {
    subject: c.subject,
    issuer: c.issuer,
    hosts: san?.names.items.map((n) => n.value) ?? [],
    notAfter: c.notAfter,
  };
}

const newKeys = async () => await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]) as CryptoKeyPair;

async function keyPem(k: CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", k), "PRIVATE KEY");
}

function validity(days: number) {
  const now = Date.now();
  return { notBefore: new Date(now - SKEW_MS), notAfter: new Date(now + days * DAY_MS) };
}

/** 16 random bytes, the first bit clear (a serial number is a positive integer) */
function serial(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[0] &= 0x7f;
  b[0] |= 0x01;
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** names come from peers: nothing that would change the DN's structure */
const cnSafe = (s: string) => s.replace(/[^A-Za-z0-9 ._:@-]/g, "_").slice(0, 64);

const isIp = (h: string) => /^\d{1,3}(\.\d{1,3}){3}$/.test(h) || h.includes(":");

function sanOf(host: string): x509.JsonGeneralName {
  const h = host.replace(/^\[|\]$/g, "");
  if (isIp(h)) return { type: "ip", value: h };
  if (!/^[A-Za-z0-9.-]{1,253}$/.test(h)) throw new Error(`"${host}" is not a host name`);
  return { type: "dns", value: h.toLowerCase() };
}

const bytes = (u: Uint8Array): ArrayBuffer => u.slice().buffer as ArrayBuffer;
