// A browser tab's dialer: every seam it opens or serves rides its one connection to the relay
// (a tab cannot accept connections), the page's own WebSocket behind the RelaySocket the
// shared RelayPeer speaks. A dropped connection is dialed again and the tab serves on under
// its name (no reload).
import { RelayPeer, type RelaySocket } from "../../src/relay/peer.ts";
import { relayOnlyDialer } from "../../src/relay/relay-seams.ts";
import { SeamError } from "../../src/seam/errors.ts";
import type { SeamDialer } from "../../src/seam/link.ts";

export function connectBrowserRelay(relayUrl: string, token: string): Promise<RelaySocket> {
  const ws = new WebSocket(`${relayUrl.replace(/\/$/, "")}/peer?token=${encodeURIComponent(token)}`);
  ws.binaryType = "arraybuffer";
  return new Promise((resolve, reject) => {
    ws.onerror = () => reject(new SeamError("unavailable", `relay ${relayUrl}: the connection failed`));
    ws.onopen = () => {
      ws.onerror = null; // close follows
      resolve({
        send: (bytes) => ws.send(bytes as Uint8Array<ArrayBuffer>),
        close: () => ws.close(1000, "done"),
        onMessage: (h) => ws.addEventListener("message", (e) => h(new Uint8Array(e.data as ArrayBuffer))),
        onClose: (h) => ws.addEventListener("close", (e) => h(`${e.code} ${e.reason}`.trim())),
      });
    };
  });
}

/** Shaped as a Deno or Node node's Dialer: its relay connection, and a dial through it. */
export interface TabDialer {
  readonly relay: { readonly url: string; readonly peer: RelayPeer };
  readonly dial: SeamDialer;
  close(): void;
}

/** The tab named `name` on the relay, holding relay token `token`. */
export async function connectDialer(
  relay: { url: string; token: string },
  name: string,
  onChange?: (up: "down" | "up", detail: string) => void,
): Promise<TabDialer> {
  const connect = () => connectBrowserRelay(relay.url, relay.token);
  const peer = new RelayPeer(await connect(), name, undefined, { connect, onChange });
  return {
    relay: { url: relay.url, peer },
    dial: relayOnlyDialer(peer, relay.url),
    close: () => peer.close(),
  };
}
