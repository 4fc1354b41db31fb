// `strata up --tls` end to end: the relay (wss://), tracker and gateway (https://) and every
// seam over TLS, nodes' certificates signed by the tracker. The same four greedy chats as on
// the same network without TLS, against whole-model llama.cpp; what a peer without the
// network's trust meets. Prints one JSON object; tls.test.ts asserts on it.
import { defaultModelPath } from "../../server/model/fetch.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { GrpcSeams, serveSeams } from "../../node-apis/seam/grpc.ts";
import { certifiedPair, newNetworkCa, newTlsKey, openNetworkCa } from "../../node-apis/tls/certs.ts";
import { trustedFetch, trustNetworkCa } from "../../node-apis/tls/trust.ts";
import { create } from "@bufbuild/protobuf";
import { NodeInfoSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { CHAT_QUESTIONS, chatReference } from "../../checks/parity/chat-reference.ts";
import { streamChat } from "../../checks/parity/chat-client.ts";

const MAX = 24;
const model = defaultModelPath();
const ref = await chatReference(model, CHAT_QUESTIONS, MAX);
const nodeToken = crypto.randomUUID();

/** "accepted", or why not (fetch puts the TLS error in the cause) */
const error = (p: Promise<unknown>) =>
  p.then(
    () => "accepted",
    (e: Error) => [e.message, (e.cause as Error | undefined)?.message].filter(Boolean).join(": "),
  );

const report: Record<string, unknown> = { reference: ref.texts };
for (const tls of [false, true]) {
  const net = await ServiceProcess.start(
    "strata up",
    ["up", "--port", "0", ...(tls ? ["--tls"] : [])],
    { STRATA_NODE_TOKEN: nodeToken },
    600_000,
  );
  try {
    const gw = String(net.ready.gateway);
    if (tls) trustNetworkCa(await Deno.readTextFile(String(net.ready.ca)));
    const fetcher = tls ? trustedFetch() : fetch;
    const chats = [];
    for (const q of CHAT_QUESTIONS) {
      const s = await streamChat(
        gw,
        {},
        { model: "smollm2", messages: [{ role: "user", content: q }], temperature: 0, max_tokens: MAX },
        undefined,
        undefined,
        fetcher,
      );
      chats.push({
        status: s.status,
        text: s.text,
        done: s.done,
        transports: s.nodes.map((n) => n.transport),
      });
    }
    const run: Record<string, unknown> = {
      urls: {
        gateway: gw,
        tracker: net.ready.tracker,
        relay: net.ready.relay,
        nodes: (net.ready.nodes as Array<{ url: string }>).map((n) => n.url),
      },
      chats,
    };
    if (tls) {
      const tracker = String(net.ready.tracker);
      const ca = await Deno.readTextFile(String(net.ready.ca));
      const node = (net.ready.nodes as Array<{ url: string }>)[0].url;
      // a client that does not trust the network's CA (the system's roots only)
      run.gatewayNoCa = await error(fetch(`${gw}/v1/models`));
      run.nodeNoCa = await error(
        Deno.connectTls({ hostname: "127.0.0.1", port: Number(new URL(node).port) }).then((c) =>
          c.handshake()
        ),
      );
      // plaintext to a TLS port
      run.gatewayPlain = await error(fetch(`${gw.replace("https:", "http:")}/v1/models`));
      // the tracker certifies a key only for the node token
      const t = trackerClient(tracker);
      const { publicKeyDer } = await newTlsKey();
      run.certifyWrongToken = await error(
        t.client.certify({
          token: "stolen?",
          node: "mallory",
          publicKey: publicKeyDer,
          hosts: ["127.0.0.1"],
        }),
      );
      t.close();
      // a seam server whose certificate another CA signed, and one the network's CA signed for
      // another host: dialed as a node would, both refused
      const info = () => Promise.resolve(create(NodeInfoSchema, { node: "mallory" }));
      const never = () => Promise.resolve();
      const foreign = await certifiedPair(await openNetworkCa(await newNetworkCa("mallory")), "n", [
        "127.0.0.1",
      ]);
      const wrongHost = await certifiedPair(
        await openNetworkCa({
          cert: ca,
          key: await Deno.readTextFile(`${String(net.ready.ca).replace(/ca\.pem$/, "ca-key.pem")}`),
        }),
        "n",
        ["10.9.9.9"],
      );
      const grpc = new GrpcSeams();
      for (const [name, cert] of [["foreignCa", foreign], ["wrongHost", wrongHost]] as const) {
        const s = await serveSeams(never, info, "127.0.0.1", 0, true, cert);
        run[name] = {
          grpc: await error(grpc.info(s.url, 5000)),
          fast: await error(
            Deno.connectTls({ hostname: "127.0.0.1", port: Number(new URL(s.url).port), caCerts: [ca] })
              .then((c) => c.handshake()),
          ),
        };
        await s.close();
      }
      grpc.close();
    }
    report[tls ? "tls" : "plain"] = run;
  } finally {
    await net.stop();
  }
}
console.log(JSON.stringify(report));
// leftover handles (keep-alive connections) must not hold the test up
Deno.exit(0);
