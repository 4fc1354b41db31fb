// The model publisher's Ed25519 key: it signs reference files. Kept in the same key-file
// form as route keys (PKCS#8 and raw public half, base64); made on first use.
import { dirname } from "node:path";
import { importPrivateRouteKey, newRouteKeyText, type RouteKeyText } from "../../src/route/keys.ts";
import { fromBase64 } from "../../src/bytes/base64.ts";
import { cacheDir } from "../process/paths.ts";
import { log } from "../log/log.ts";

export interface PublisherKey {
  readonly privateKey: CryptoKey;
  readonly publicRaw: Uint8Array;
}

export const defaultPublisherKeyPath = () => cacheDir("keys", "publisher.json");

export async function publisherKey(path = defaultPublisherKeyPath()): Promise<PublisherKey> {
  let text: RouteKeyText;
  try {
    text = JSON.parse(await Deno.readTextFile(path));
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    await Deno.mkdir(dirname(path), { recursive: true });
    // written whole, then linked into place: of two processes making the key at once one
    // wins, and both read its key (never half of it)
    const part = `${path}.${Deno.pid}.${crypto.randomUUID()}.part`;
    await Deno.writeTextFile(part, JSON.stringify(await newRouteKeyText()), { mode: 0o600 });
    try {
      await Deno.link(part, path);
      log.info("publisher key made", { path });
    } catch (made) {
      if (!(made instanceof Deno.errors.AlreadyExists)) throw made;
    } finally {
      await Deno.remove(part);
    }
    text = JSON.parse(await Deno.readTextFile(path));
  }
  return { privateKey: await importPrivateRouteKey(text), publicRaw: fromBase64(text.public) };
}
