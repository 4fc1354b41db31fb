// Route signing keys as text: the tracker (or the operator of a static route) keeps the
// private half; nodes get the public half only.
const b64 = (b: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(b)));
const unb64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

export interface RouteKeyText {
  readonly algorithm: "Ed25519";
  /** PKCS#8, base64; absent in a public-only key file */
  readonly private?: string;
  /** raw 32 bytes, base64 */
  readonly public: string;
}

export async function newRouteKeyText(): Promise<RouteKeyText> {
  const k = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]) as CryptoKeyPair;
  return {
    algorithm: "Ed25519",
    private: b64(await crypto.subtle.exportKey("pkcs8", k.privateKey)),
    public: b64(await crypto.subtle.exportKey("raw", k.publicKey)),
  };
}

/**
 * The public half as a verifying key, from a key file, its base64 text, or the raw 32 bytes
 * (as the tracker hands them out at registration).
 */
export async function importPublicRouteKey(key: RouteKeyText | string | Uint8Array): Promise<CryptoKey> {
  // a copy: WebCrypto wants bytes on a plain ArrayBuffer
  const raw = key instanceof Uint8Array ? key.slice() : unb64(typeof key === "string" ? key : key.public);
  return await crypto.subtle.importKey("raw", raw, { name: "Ed25519" }, true, ["verify"]);
}

export async function importPrivateRouteKey(text: RouteKeyText): Promise<CryptoKey> {
  if (!text.private) throw new Error("this route key file holds the public key only");
  return await crypto.subtle.importKey("pkcs8", unb64(text.private), { name: "Ed25519" }, false, ["sign"]);
}
