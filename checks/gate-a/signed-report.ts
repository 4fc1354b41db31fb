// Signed bench reports: the report's JSON text, then an Ed25519 signature over exactly those
// bytes (the report without its `signature` field, as JSON.stringify writes it), with the
// signer's public key beside it. `strata bench verify` checks one.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  importPrivateRouteKey,
  importPublicRouteKey,
  newRouteKeyText,
  type RouteKeyText,
} from "../../src/route/keys.ts";
import { fromBase64, toBase64 } from "../../src/bytes/base64.ts";
import { cacheDir } from "../../server/process/paths.ts";

export interface Signature {
  readonly algorithm: "Ed25519";
  /** raw 32 bytes, base64 */
  readonly public_key: string;
  /** over the UTF-8 bytes of JSON.stringify(report without `signature`) */
  readonly value: string;
}

const signedBytes = (report: Record<string, unknown>) => {
  const { signature: _, ...rest } = report;
  return new TextEncoder().encode(JSON.stringify(rest));
};

/** This machine's bench signing key, made on first use (kept beside the other Strata caches). */
export async function benchKey(
  path = join(cacheDir("keys"), "bench-signing-key.json"),
): Promise<RouteKeyText> {
  try {
    return JSON.parse(await readFile(path, "utf8"));
  } catch {
    const key = await newRouteKeyText();
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, JSON.stringify(key), { mode: 0o600 });
    return key;
  }
}

export async function signReport<T extends Record<string, unknown>>(
  report: T,
  key: RouteKeyText,
): Promise<T & { signature: Signature }> {
  const sig = await crypto.subtle.sign("Ed25519", await importPrivateRouteKey(key), signedBytes(report));
  return {
    ...report,
    signature: { algorithm: "Ed25519", public_key: key.public, value: toBase64(new Uint8Array(sig)) },
  };
}

/** Whether the report's signature holds for its contents (and, when given, is by `publicKey`). */
export async function verifyReport(
  report: Record<string, unknown>,
  publicKey?: string,
): Promise<{ ok: boolean; why: string; signer?: string }> {
  const s = report.signature as Signature | undefined;
  if (!s || s.algorithm !== "Ed25519" || !s.public_key || !s.value) {
    return { ok: false, why: "no Ed25519 signature" };
  }
  if (publicKey && publicKey !== s.public_key) {
    return { ok: false, why: `signed by ${s.public_key}, not by ${publicKey}`, signer: s.public_key };
  }
  const ok = await crypto.subtle.verify(
    "Ed25519",
    await importPublicRouteKey(s.public_key),
    Uint8Array.from(fromBase64(s.value)),
    signedBytes(report),
  );
  return {
    ok,
    why: ok ? "the signature holds" : "the signature does not match the report",
    signer: s.public_key,
  };
}
