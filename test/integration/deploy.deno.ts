// docs/deploy.md's public network, run as written: one network namespace per role (origin,
// tracker, gateway + relay, three node hosts, a client and volunteer host), each with its own
// empty STRATA_CACHE and HOME, names resolved by each namespace's own /etc/hosts. The guide's
// commands are read from the page and run in their hosts. Then: 8 concurrent chats with the
// `openai` package over HTTPS against whole-model llama.cpp, a headless Chromium tab that
// trusts the network's CA (NSS store, no ignored errors) serving over wss://, what each host's
// cache holds, a node host cut off mid-chat, and a tracker restart with --data.
// Prints one JSON object; deploy.test.ts asserts on it.
import { createHosts, setHostNames } from "../../checks/hosts/netns.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { buildDir, repoRoot } from "../../server/process/paths.ts";
import { Chromium } from "../../server/browser/chromium.ts";
import { openVolunteerTab } from "../../server/browser/volunteer-tab.ts";
import { ensureDebianPackages } from "../../server/toolchain/apt.ts";
import { type ArtifactManifest, shardPieces } from "../../src/artifact/pieces.ts";
import { coverage, type NetworkState } from "../../src/gateway/network-view.ts";
import { chatReference, EIGHT_QUESTIONS } from "../../checks/parity/chat-reference.ts";
import { openaiVenv } from "./openai-venv.ts";
import { SYNTH_CAP, synthLlama1GB } from "../../checks/samples/synth-model.ts";

const MAX = 12;
const QUESTIONS = EIGHT_QUESTIONS;
const ROLES = ["origin", "tracker", "gateway", "node1", "node2", "node3", "client"];
const GATEWAY = "https://gateway.example.net:8443";
const TAB_CAP = 2 * SYNTH_CAP;

const model = await synthLlama1GB({ reference: true });
const fileBytes = (await Deno.stat(model)).size;
const ref = await chatReference(model, QUESTIONS, MAX);
await ensureDebianPackages(["libnss3-tools"]);
const venv = await openaiVenv();

/** The guide's shell blocks in its public-network section, by the host each names ("# on …"). */
async function guide(): Promise<Array<{ on: string; lines: string[] }>> {
  const page = await Deno.readTextFile(`${repoRoot}/docs/deploy.md`);
  const section = page.split("\n## ").find((s) => s.startsWith("A public network, step by step"));
  if (!section) throw new Error("docs/deploy.md has no section 'A public network, step by step'");
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => {
    const [first, ...rest] = m[1].replace(/\\\n\s*/g, "").split("\n");
    const on = /^# on (.+)$/.exec(first)?.[1];
    if (!on) throw new Error(`a block of docs/deploy.md does not say its host: ${first}`);
    return { on, lines: rest.filter((l) => l.trim() && !l.startsWith("#")) };
  });
}

/** Which test host a guide block's "# on …" means. */
const hostOf = (on: string) =>
  on === "your own machine"
    ? "operator"
    : on === "a client" || on === "a volunteer's machine"
    ? "client"
    : on.replace(/\.example\.net$/, "");

const dir = await Deno.makeTempDir({ prefix: "strata-deploy-" });
const net = await createHosts(ROLES, "10.214.0");
const host = (name: string) => net.hosts.find((h) => h.name === name)!;
const home = (name: string) => `${dir}/${name}`;
const bin = `${dir}/bin`;
Deno.mkdirSync(bin);
Deno.symlinkSync(`${repoRoot}/strata`, `${bin}/strata`);
const procs = new Map<string, ServiceProcess>();
let chromium: Chromium | undefined;
const report: Record<string, unknown> = { fileBytes, reference: ref.texts };
let modelUrl = "";
// when each phase ended, seconds from the start: where the test's time goes
const t0 = performance.now();
const phases: Record<string, number> = {};
report.phases = phases;
const mark = (phase: string) => {
  phases[phase] = Math.round(performance.now() - t0) / 1000;
  console.error(`deploy: ${phase} at ${phases[phase]} s`);
};

/** A host's environment: its own HOME and empty cache, the builds shared as the software is. */
const envOf = (name: string): Record<string, string> => ({
  PATH: `${name === "client" ? `${venv}/bin:` : ""}${bin}:${Deno.env.get("PATH")}`,
  HOME: home(name),
  STRATA_CACHE: `${home(name)}/.cache/strata`,
  STRATA_BUILDS: buildDir(),
  MODEL: modelUrl,
});

async function sh(name: string, line: string, extraEnv: Record<string, string> = {}): Promise<string> {
  const h = name === "operator" ? undefined : host(name);
  const argv = ["bash", "-c", line];
  const [cmd, ...args] = h ? ["ip", "netns", "exec", h.netns, ...argv] : argv;
  const o = await new Deno.Command(cmd, {
    args,
    cwd: home(name),
    env: { ...envOf(name), ...extraEnv },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(o.stdout);
  if (o.code !== 0) {
    // the last line (the exception) first: a long report is cut in its middle
    const err = new TextDecoder().decode(o.stderr).trimEnd();
    const last = err.slice(err.lastIndexOf("\n") + 1);
    throw new Error(`on ${name}: ${last}\n  from: ${line}\n${err.slice(-3000)}`);
  }
  return out;
}

const SERVER = /^(\w+=(?:\$\([^)]*\)|\S+) )*strata (artifacts|relay|tracker|gateway|node)\b/;

async function serve(name: string, line: string): Promise<ServiceProcess> {
  const label = `${name}: ${SERVER.exec(line)![2]}`;
  const p = await ServiceProcess.startLine(label, line, {
    env: envOf(name),
    cwd: home(name),
    netns: host(name).netns,
    timeoutMs: 900_000,
  });
  procs.set(label, p);
  return p;
}

/** `strata status --json` from the client host, as the guide's client line asks it. */
type Status = { state: NetworkState; health: { ok: boolean } };
let lastStatus: Status | undefined;
async function status(): Promise<Status> {
  return lastStatus = JSON.parse(await sh("client", `strata status --url ${GATEWAY} --ca ca.pem --json`));
}

/** Serving, every node admitted and live, and no range moving for eight polls in a row (about
 *  20 s: placement moves a node as others join). */
async function settled(ms: number, why: string): Promise<Status> {
  let same = 0, last = "";
  return await until(
    status,
    (s) => {
      const ranges = JSON.stringify(s.state.nodes.map((n) => [n.node, n.start, n.end, n.live, n.admission]));
      same = ranges === last ? same + 1 : 0;
      last = ranges;
      return s.health.ok && s.state.nodes.every((n) => n.live && n.admission === "admitted") && same >= 8;
    },
    ms,
    why,
  );
}

async function until<T>(what: () => Promise<T>, ok: (v: T) => boolean, ms: number, why: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await what().catch(() => undefined);
    if (v !== undefined && ok(v)) return v;
    if (Date.now() > end) {
      throw new Error(`${why}: not within ${ms / 1000} s (${JSON.stringify(v)?.slice(0, 2000)})`);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

const admitted = (s: NetworkState) => s.nodes.filter((n) => n.live && n.admission === "admitted");
const complete = (s: NetworkState) => coverage(s.model.nLayer, s.nodes).every((c) => c > 0);

/** What a host's cache holds: each file with its apparent size and the bytes it takes on disk. */
async function cacheOf(name: string) {
  const root = `${home(name)}/.cache/strata`;
  const files: Array<{ path: string; size: number; disk: number }> = [];
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory) await walk(p);
      else if (e.isFile) {
        const st = await Deno.stat(p);
        files.push({ path: p.slice(root.length + 1), size: st.size, disk: (st.blocks ?? 0) * 512 });
      }
    }
  };
  await walk(root).catch(() => {});
  return { files, diskBytes: files.reduce((a, f) => a + f.disk, 0) };
}

try {
  const blocks = await guide();
  report.guide = blocks.map((b) => ({ on: b.on, lines: b.lines.length }));
  for (const name of ["operator", ...ROLES]) Deno.mkdirSync(home(name), { recursive: true });
  // each host's own /etc/hosts (ip netns exec binds /etc/netns/<ns>/hosts over it)
  const names: Array<[string, string]> = [
    ...ROLES.filter((r) => r !== "client").map((r): [string, string] => [`${r}.example.net`, host(r).ip]),
    ["relay.example.net", host("gateway").ip],
  ];
  for (const h of net.hosts) await setHostNames(h, names);

  // 1. secrets and certificates on the operator's machine, then each host's files as the table says
  for (const line of blocks.find((b) => b.on === "your own machine")!.lines) await sh("operator", line);
  const files: Record<string, string[]> = {
    tracker: ["ca.pem", "ca-key.pem", "node-token", "tracker.relay-token"],
    gateway: [
      "ca.pem",
      "gateway.pem",
      "gateway-key.pem",
      "relay-secret",
      "node-token",
      "gateway.relay-token",
      "api-keys",
    ],
    origin: ["origin.pem", "origin-key.pem"],
    node1: ["ca.pem", "node-token", "node1.relay-token"],
    node2: ["ca.pem", "node-token", "node2.relay-token"],
    node3: ["ca.pem", "node-token", "node3.relay-token"],
    client: ["ca.pem", "api-keys"],
  };
  for (const [name, list] of Object.entries(files)) {
    for (const f of list) await Deno.copyFile(`${home("operator")}/net/${f}`, `${home(name)}/${f}`);
  }
  // the publisher's files on the origin (links: a gigabyte is not copied for a test)
  await Deno.link(model, `${home("origin")}/model.gguf`);
  await Deno.link(`${model}.strata-ref`, `${home("origin")}/model.gguf.strata-ref`);

  // 2. the servers, in the guide's order; the volunteer comes before the nodes: the spare room of
  // this network is the tab's (three 400 MB nodes cannot hold the model), and a tab does not move,
  // so it must be placed first for the nodes to double a range and fill the hole a cut host leaves
  const started: Record<string, unknown> = {};
  const servers = (nodes: boolean) =>
    blocks.flatMap((b) => {
      const name = hostOf(b.on);
      if (!ROLES.includes(name) || name === "client" || name.startsWith("node") !== nodes) return [];
      return b.lines.filter((l) => SERVER.test(l)).map((line) => ({ name, line }));
    });
  for (const { name, line } of servers(false)) {
    const p = await serve(name, line);
    started[`${name} ${SERVER.exec(line)![2]}`] = p.ready;
    if (name === "origin") modelUrl = String((p.ready.artifacts as string[])[0]);
  }
  report.modelUrl = modelUrl;
  mark("servers up");
  const clientLines = blocks.find((b) => b.on === "a client")!.lines;

  // a volunteer: the guide's certutil lines on the client host, then Chromium there with that HOME
  for (const line of blocks.find((b) => b.on === "a volunteer's machine")!.lines) await sh("client", line);
  const wrapper = `${dir}/chromium-on-client`;
  await Deno.writeTextFile(
    wrapper,
    `#!/bin/sh\nexec ip netns exec ${host("client").netns} env HOME=${home("client")} ${
      Deno.env.get("STRATA_CHROMIUM") ?? "/usr/bin/chromium"
    } "$@"\n`,
    { mode: 0o755 },
  );
  chromium = await Chromium.launch([], { executable: wrapper });
  const tab = await openVolunteerTab(GATEWAY, { chromium, memoryCapBytes: TAB_CAP, threads: 1 });
  const served = await tab.contribute(600_000);
  mark("tab serving");
  report.tab = {
    name: served.name,
    range: served.assignment?.range,
    engine: served.engine,
    download: served.download,
  };
  for (const { name, line } of servers(true)) {
    const p = await serve(name, line);
    started[`${name} node`] = p.ready;
  }
  report.started = started;
  mark("nodes started");
  const placed = await settled(600_000, "the nodes placed beside the tab");
  report.placed = placed.state.nodes;
  mark("placed and settled");
  report.statusText = await sh("client", clientLines[0]);

  // what each host holds, once the nodes are placed and serving
  const m = JSON.parse(
    await sh("client", `curl -s --cacert ca.pem ${modelUrl}/manifest`),
  ) as ArtifactManifest;
  const caches: Record<string, unknown> = {};
  for (const name of ["tracker", "gateway", "node1", "node2", "node3", "client"]) {
    const c = await cacheOf(name);
    const node = placed.state.nodes.find((n) => n.node === name);
    // a node's pieces, each one of its own range's
    let foreignPieces: number | undefined;
    if (node) {
      const mine = new Set(shardPieces(m, node.start, node.end).map((p) => p.sha256));
      const pieces = c.files.filter((f) => f.path.startsWith("pieces/"));
      foreignPieces = pieces.filter((f) => !mine.has(f.path.slice("pieces/".length))).length;
    }
    caches[name] = {
      diskBytes: c.diskBytes,
      share: c.diskBytes / fileBytes,
      files: c.files.map((f) => `${f.path} ${f.size} (${f.disk} on disk)`),
      layers: node ? `${node.start}:${node.end}` : undefined,
      foreignPieces,
      rangePieces: node ? shardPieces(m, node.start, node.end).length : undefined,
    };
  }
  report.caches = caches;
  mark("caches read");
  const withTab = placed;
  if (!admitted(withTab.state).some((n) => n.node === served.name)) {
    throw new Error("the tab is not admitted");
  }
  report.withTab = withTab.state.nodes;
  // 3. the guide's client line, as written, once the network covers the model
  report.guideChat = (await sh("client", clientLines[1])).trim();
  mark("guide chat");

  // 8 concurrent chats through the gateway, the openai package on the client host over HTTPS
  const env = `SSL_CERT_FILE=ca.pem OPENAI_BASE_URL=${GATEWAY}/v1 OPENAI_API_KEY=$(cat api-keys)`;
  const script = `${repoRoot}/test/integration/deploy_chats.py`;
  const many = JSON.parse(
    await sh("client", `${env} python3 ${script} many`, {
      DEPLOY_QUESTIONS: JSON.stringify(QUESTIONS),
      DEPLOY_MAX_TOKENS: String(MAX),
    }),
  ) as string[];
  report.chats = many.map((text, q) => {
    const exact = text === ref.texts[q];
    return { q, text, exact, at: exact ? undefined : ref.divergence(q, text) };
  });

  mark("8 chats");

  // a node host loses its link mid-chat: a native node whose range nobody doubles if there is
  // one (every route runs through it), else the first; the hole is filled by what doubles it
  const before = withTab.state;
  const hosts = coverage(before.model.nLayer, before.nodes);
  const natives = admitted(before).filter((n) => n.node.startsWith("node"));
  const victim = natives.find((n) => hosts.slice(n.start, n.end).every((c) => c === 1)) ?? natives[0];
  report.victim = victim;
  const cut = new Deno.Command("ip", {
    args: ["netns", "exec", host("client").netns, "bash", "-c", `${env} python3 ${script} stream`],
    cwd: home("client"),
    env: {
      ...envOf("client"),
      DEPLOY_QUESTIONS: JSON.stringify([QUESTIONS[1]]),
      DEPLOY_MAX_TOKENS: String(MAX),
    },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const pieces: string[] = [];
  let done: string | undefined;
  let cutAt = 0;
  let buf = "";
  for await (const chunk of cut.stdout.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      const j = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (j.piece !== undefined) pieces.push(j.piece);
      if (j.done !== undefined) done = j.done;
      if (pieces.length === 2 && !cutAt) {
        cutAt = performance.now();
        await new Deno.Command("ip", {
          args: ["-n", host(victim.node).netns, "link", "del", host(victim.node).dev],
        })
          .output();
      }
    }
  }
  const cutStatus = await cut.status;
  const cutErr = new TextDecoder().decode(await new Response(cut.stderr).arrayBuffer());
  mark("cut chat");
  report.cutChat = {
    text: done,
    exact: done === ref.texts[1],
    piecesBeforeCut: 2,
    ms: Math.round(performance.now() - cutAt),
    code: cutStatus.code,
    stderr: cutStatus.code ? cutErr.slice(-2000) : undefined,
  };
  const filled = await until(
    status,
    (s) => !admitted(s.state).some((n) => n.node === victim.node) && complete(s.state) && s.health.ok,
    300_000,
    "the hole filled",
  );
  report.filled = filled.state.nodes;
  mark("hole filled");
  report.filledText = await sh("client", clientLines[0]);

  // the tracker restarts with --data: its nodes stay admitted, its route key is the same
  const trackerLine = blocks.find((b) => b.on === "tracker.example.net")!.lines[0];
  const keyBefore = filled.state.routeKey;
  const admittedBefore = admitted(filled.state).map((n) => n.node).sort();
  await procs.get("tracker: tracker")!.stop();
  await serve("tracker", trackerLine);
  const afterRestart = await until(status, (s) => s.state.nodes.length > 0, 60_000, "the tracker back");
  report.restart = {
    keyBefore,
    keyAfter: afterRestart.state.routeKey,
    admittedBefore,
    // straight after the restart, from its database
    recordsAfter: afterRestart.state.nodes.map((n) => ({ node: n.node, admission: n.admission })),
  };
  const again = await until(
    status,
    (s) => admitted(s.state).length === admittedBefore.length && s.health.ok,
    120_000,
    "serving again after the restart",
  );
  (report.restart as Record<string, unknown>).admittedAfter = admitted(again.state).map((n) => n.node).sort();
  mark("tracker restarted");
} catch (e) {
  // what it got to, for whoever reads the failure (the caches' file lists left out: they are long)
  const { caches: _, ...got } = report;
  console.error(JSON.stringify({ failed: String(e), lastStatus, ...got }));
  throw e;
} finally {
  await chromium?.close();
  for (const p of [...procs.values()].reverse()) await p.stop(5000);
  await net.destroy();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
console.log(JSON.stringify(report));
Deno.exit(0);
