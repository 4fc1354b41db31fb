// A relay connection from Deno through npm:ws (Deno's own WebSocket client stalls about
// 44 ms per message under Nagle + delayed ACK; ws sets TCP_NODELAY).
import { WebSocket } from "ws";
import type { RelaySocket } from "../../src/relay/peer.ts";
import { SeamError } from "../../src/seam/errors.ts";
import { MAX_FRAME_BYTES } from "../../src/seam/limits.ts";
import { nodeTlsOptions } from "../tls/trust.ts";

export function connectRelay(relayUrl: string, token: string, timeoutMs = 10_000): Promise<RelaySocket> {
  const ws = new WebSocket(`${relayUrl.replace(/\/$/, "")}/peer?token=${encodeURIComponent(token)}`, {
    maxPayload: MAX_FRAME_BYTES + 8192,
    handshakeTimeout: timeoutMs,
    ...nodeTlsOptions(),
  });
  return new Promise((resolve, reject) => {
    ws.once("error", (e) => reject(new SeamError("unavailable", `relay ${relayUrl}: ${e.message}`)));
    ws.once("unexpected-response", (_req, res) => {
      reject(
        new SeamError("unauthenticated", `relay ${relayUrl} refused the token (HTTP ${res.statusCode})`),
      );
      ws.terminate();
    });
    ws.once("open", () => {
      ws.on("error", () => {}); // close follows
      resolve({
        send: (bytes) => ws.send(bytes),
        close: () => ws.close(1000, "done"),
        onMessage: (h) => ws.on("message", (d) => h(new Uint8Array(d as Buffer))),
        onClose: (h) => ws.on("close", (code, reason) => h(`${code} ${reason.toString() || ""}`.trim())),
      });
    });
  });
}
