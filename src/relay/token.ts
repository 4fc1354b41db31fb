// Relay peer tokens: "<name>.<base64url HMAC-SHA256(secret, name)>". The relay derives a
// peer's name from its token, so a peer can only ever speak as the name it was given.
const enc = new TextEncoder();
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

async function hmacKey(secret: string): Promise<CryptoKey> {
  return await crypto.subtle.importKey("raw", enc.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
    "verify",
  ]);
}

const b64url = (b: Uint8Array) =>
  btoa(String.fromCharCode(...b)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

function fromB64url(s: string): Uint8Array | undefined {
  try {
    const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
    return Uint8Array.from(bin, (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}

export async function peerToken(secret: string, name: string): Promise<string> {
  if (!NAME.test(name)) throw new Error(`peer name "${name}": 1-64 of A-Z a-z 0-9 _ -`);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", await hmacKey(secret), enc.encode(name)));
  return `${name}.${b64url(mac)}`;
}

/** The peer name a token proves, or undefined. */
export async function verifyPeerToken(secret: string, token: string): Promise<string | undefined> {
  const dot = token.lastIndexOf(".");
  const name = token.slice(0, dot);
  const mac = fromB64url(token.slice(dot + 1));
  if (dot < 1 || !NAME.test(name) || !mac) return undefined;
  const ok = await crypto.subtle.verify("HMAC", await hmacKey(secret), mac.slice(), enc.encode(name));
  return ok ? name : undefined;
}
