// A one-machine network that the LAN can reach, as docs/deploy.md runs it: `strata up --listen
// <address> --data DIR` (127.0.0.2 here: a loopback address other than the default, so that the
// tracker and the relay take their fixed ports on it), a node joined by hand with the node token
// from DIR (`--node-token-file`, placed with --layers auto), `strata status`, and a restart of the
// whole network from the same DIR: the node token is the same, the hand-joined node is still
// admitted, and chats work. No process of the network carries a secret in its argv.
// Prints one JSON object; lan.test.ts asserts on it.
import { ServiceProcess } from "../../server/process/service-process.ts";
import { strataCli } from "./strata-cli.ts";

const ADDR = "127.0.0.2";
const dir = await Deno.makeTempDir({ prefix: "strata-lan-" });
const data = `${dir}/net`;
const report: Record<string, unknown> = {};

const upNet = () =>
  ServiceProcess.start(
    "strata up",
    ["up", "--listen", ADDR, "--port", "0", "--data", data, "--lease-ms", "4000"],
    {},
    600_000,
  );
const chat = async (gw: string) => {
  const r = await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "smollm2",
      messages: [{ role: "user", content: "Hi!" }],
      max_tokens: 8,
      temperature: 0,
    }),
  });
  return { status: r.status, text: (await r.json()).choices?.[0]?.message?.content };
};
/** Every argument of every process whose command line mentions `needle`. */
function argvOf(pids: number[]): string[] {
  return pids.flatMap((p) => {
    try {
      return Deno.readTextFileSync(`/proc/${p}/cmdline`).split("\0");
    } catch {
      return [];
    }
  });
}
const admitted = async (gw: string, n: number) => {
  for (const t0 = Date.now(); Date.now() - t0 < 120_000; await new Promise((r) => setTimeout(r, 500))) {
    const s = JSON.parse(await strataCli(["status", "--url", gw, "--json"]));
    const ok = s.state.nodes.filter((x: { live: boolean; admission: string }) =>
      x.live && x.admission === "admitted"
    );
    if (ok.length >= n) return s;
  }
  throw new Error(`fewer than ${n} admitted nodes`);
};

let net = await upNet();
let node: ServiceProcess | undefined;
try {
  const gw = String(net.ready.gateway);
  report.urls = { gateway: gw, tracker: net.ready.tracker, relay: net.ready.relay };
  const token = Deno.readTextFileSync(`${data}/node-token`).trim();
  node = await ServiceProcess.start(
    "hand node",
    [
      "node",
      "--model",
      "smollm2",
      "--layers",
      "auto",
      "--memory-cap",
      "2GB",
      "--tracker",
      `http://${ADDR}:7600`,
      "--node-token-file",
      `${data}/node-token`,
      "--listen",
      `${ADDR}:0`,
      "--name",
      "by-hand",
    ],
    {},
    300_000,
  );
  const before = await admitted(gw, 3);
  report.status_text = await strataCli(["status", "--url", gw]);
  report.before = {
    nodes: before.state.nodes.map((n: { node: string }) => n.node).sort(),
    chat: await chat(gw),
  };
  const pids = [
    Number(net.ready.tracker_pid),
    Number(net.ready.gateway_pid),
    ...(net.ready.nodes as Array<{ pid: number }>).map((n) => n.pid),
  ];
  report.secret_in_argv = argvOf(pids).some((a) => a.includes(token));
  report.files = [...Deno.readDirSync(data)].map((e) => e.name).sort();

  // the whole network again, from the same folder
  await net.stop();
  net = await upNet();
  const gw2 = String(net.ready.gateway);
  const after = await admitted(gw2, 3);
  report.after = {
    token_same: Deno.readTextFileSync(`${data}/node-token`).trim() === token,
    tracker: net.ready.tracker,
    by_hand: after.state.nodes.find((n: { node: string }) => n.node === "by-hand"),
    chat: await chat(gw2),
  };
} finally {
  await node?.stop();
  await net.stop();
  await Deno.remove(dir, { recursive: true });
}
console.log(JSON.stringify(report));
Deno.exit(0);
