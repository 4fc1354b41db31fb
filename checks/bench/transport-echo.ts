// The echo side of `strata bench transport`, in a process of its own: one seam frame's bytes
// back to the sender over three transports — a Strata seam (Connect/gRPC on HTTP/2), one
// WebSocket (npm ws, TCP_NODELAY), and length-prefixed frames on plain TCP — and the Strata
// seam again over TLS, with a certificate from a CA made here. Prints its ports and the CA.
import { WebSocketServer } from "ws";
import { serveSeams } from "../../node-apis/seam/grpc.ts";
import { create } from "@bufbuild/protobuf";
import { NodeInfoSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import type { SeamServe } from "../../src/seam/link.ts";
import { certifiedPair, newNetworkCa, openNetworkCa } from "../../node-apis/tls/certs.ts";

const echo: SeamServe = async (frames, reply) => {
  for await (const f of frames) reply(f);
};
const info = () => Promise.resolve(create(NodeInfoSchema, {}));
const grpc = await serveSeams(echo, info, "127.0.0.1", 0);
const ca = await newNetworkCa("bench");
const tls = await serveSeams(
  echo,
  info,
  "127.0.0.1",
  0,
  true,
  await certifiedPair(await openNetworkCa(ca), "echo", ["127.0.0.1"]),
);

const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
wss.on("connection", (ws) => ws.on("message", (d) => ws.send(d as Buffer)));
await new Promise((r) => wss.on("listening", r));

const tcp = Deno.listen({ hostname: "127.0.0.1", port: 0 });
(async () => {
  for await (const c of tcp) {
    c.setNoDelay(true);
    (async () => {
      const buf = new Uint8Array(1 << 20);
      for (;;) {
        const n = await c.read(buf);
        if (n === null) break;
        for (let w = 0; w < n;) w += await c.write(buf.subarray(w, n));
      }
    })().catch(() => {});
  }
})();

console.log(JSON.stringify({
  grpc: grpc.url,
  tls: tls.url,
  ca: ca.cert,
  ws: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`,
  tcp: (tcp.addr as Deno.NetAddr).port,
}));
