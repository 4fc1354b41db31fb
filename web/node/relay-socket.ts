// A browser tab's connection to the relay: the page's own WebSocket behind the RelaySocket
// the shared RelayPeer speaks (a tab cannot accept connections, so every seam it serves or
// opens rides this one socket).
import type { RelaySocket } from "../../src/relay/peer.ts";
import { SeamError } from "../../src/seam/errors.ts";

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
