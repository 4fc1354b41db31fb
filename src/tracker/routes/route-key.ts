// The tracker's route key: made once and kept in storage, so a restarted tracker signs
// with the same key and tickets already out stay verifiable.
import { fromBase64 } from "../../bytes/base64.ts";
import { importPrivateRouteKey, newRouteKeyText, type RouteKeyText } from "../../route/keys.ts";
import type { TrackerStorage } from "../membership/storage.ts";

/** Where storage keeps the key. */
export const ROUTE_KEY_META = "route_key";

export interface TrackerRouteKey {
  readonly privateKey: CryptoKey;
  /** the private key as PKCS#8, for a runtime's own signer (`TrackerCoreOptions.claimSigner`) */
  readonly privatePkcs8: Uint8Array;
  /** raw Ed25519 public key, handed to every registering node */
  readonly publicRaw: Uint8Array;
}

export async function loadRouteKey(storage: TrackerStorage): Promise<TrackerRouteKey> {
  let text = storage.meta(ROUTE_KEY_META);
  if (!text) {
    text = JSON.stringify(await newRouteKeyText());
    storage.setMeta(ROUTE_KEY_META, text);
  }
  const k = JSON.parse(text) as RouteKeyText;
  return {
    privateKey: await importPrivateRouteKey(k),
    privatePkcs8: fromBase64(k.private!),
    publicRaw: fromBase64(k.public),
  };
}
