// The network page: the tracker's view of the network once a second, drawn as bars over the
// model's layers, with the coverage, the routes in use and what changed between looks.
import {
  type Change,
  changes,
  coverage,
  type NetworkState,
  type NodeView,
} from "../../src/gateway/network-view.ts";
import type { LoadSeries } from "../../src/gateway/load-history.ts";
import { chartsShown, drawLoad } from "./charts.ts";

const $ = (id: string) => document.getElementById(id)!;
const mib = (n: number) => `${(n / 2 ** 20).toFixed(0)} MiB`;
const el = (tag: string, cls = "", text = "") => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text) e.textContent = text;
  return e;
};

let last: NetworkState | undefined;
const log: Array<{ at: number; change: Change }> = [];

function kind(n: NodeView): string {
  if (n.admission.startsWith("refused")) return "refused";
  if (!n.live) return "down";
  return n.engine.includes("webgpu") ? "webgpu" : n.engine.startsWith("wasm") ? "wasm" : "native";
}

function describe(c: Change): string {
  if (c.kind === "joined") return `${c.node} joined with layers ${c.layers}`;
  if (c.kind === "moved") return `${c.node} moved from ${c.from} to ${c.to}`;
  return `${c.node} left (it held ${c.layers})`;
}

function draw(s: NetworkState): void {
  const L = s.model.nLayer;
  const grid = $("grid");
  grid.style.gridTemplateColumns = `260px repeat(${L}, minmax(14px, 1fr))`;
  grid.replaceChildren();
  // the layer axis
  grid.append(el("div", "label", "layer"));
  for (let l = 0; l < L; l++) grid.append(el("div", "axis", l % 5 === 0 ? String(l) : ""));
  // coverage: hosts per layer
  const hosts = coverage(L, s.nodes);
  grid.append(el("div", "label", "coverage (live, admitted hosts)"));
  for (const h of hosts) {
    grid.append(el("div", `cell ${h === 0 ? "gap" : h === 1 ? "thin" : "ok"}`, String(h)));
  }
  const inRoute = new Set(s.routes.flatMap((r) => r.name.split("+")));
  const sorted = [...s.nodes].sort((a, b) => a.start - b.start || a.node.localeCompare(b.node));
  for (const [i, n] of sorted.entries()) {
    // rows 1 and 2 are the axis and the coverage: each node has a row of its own
    const row = String(i + 3);
    const label = el("div", "label");
    label.style.gridRow = row;
    label.style.gridColumn = "1";
    label.append(el("b", "", n.node), el("br"));
    const cap = n.capBytes > 0 ? `${mib(n.needBytes)} of ${mib(n.capBytes)}` : `${mib(n.needBytes)}, no cap`;
    label.append(
      el("small", "", `${n.engine} · ${cap} · ${n.tokensPerS.toFixed(1)} tok/s · ${n.sessions} session(s)`),
    );
    grid.append(label);
    const bar = el("div", `bar ${kind(n)}${inRoute.has(n.node) ? " inroute" : ""}`, `${n.start}:${n.end}`);
    bar.style.gridColumn = `${n.start + 2} / ${n.end + 2}`;
    bar.style.gridRow = row;
    bar.title = `${n.node}: layers ${n.start}:${n.end}, ${n.admission}${n.live ? "" : ", not live"}`;
    if (n.capBytes > 0) {
      const mem = el("div", "mem");
      const used = el("div");
      used.style.width = `${Math.min(100, (100 * n.needBytes) / n.capBytes).toFixed(0)}%`;
      mem.append(used);
      bar.append(mem);
    }
    grid.append(bar);
  }
  const gaps = hosts.filter((h) => h === 0).length;
  const thin = hosts.filter((h) => h === 1).length;
  const live = s.nodes.filter((n) => n.live && n.admission === "admitted").length;
  $("summary").textContent = `${s.model.name} · ${L} layers · ${live} of ${s.nodes.length} nodes serving · ` +
    (gaps ? `${gaps} layer(s) uncovered` : "every layer covered") +
    (thin ? ` · ${thin} held by one node` : "");
  $("routes").replaceChildren(
    ...(s.routes.length
      ? s.routes.map((r) => el("li", "", `${r.name}: ${r.sessions} session(s)`))
      : [el("li", "", "none right now")]),
  );
  $("changes").replaceChildren(
    ...(log.length
      ? log.slice(0, 30).map((e) =>
        el("li", "", `${new Date(e.at).toLocaleTimeString()} — ${describe(e.change)}`)
      )
      : [el("li", "", "none yet")]),
  );
}

async function tick(): Promise<void> {
  try {
    const s = await (await fetch("/network/api/state")).json() as NetworkState;
    if (last) { for (const change of changes(last.nodes, s.nodes)) log.unshift({ at: s.at, change }); }
    last = s;
    draw(s);
  } catch (e) {
    $("summary").textContent = `the gateway did not answer: ${e instanceof Error ? e.message : e}`;
  }
}

async function loadTick(): Promise<void> {
  try {
    drawLoad(await (await fetch("/network/api/load")).json() as LoadSeries);
  } catch {
    // the next look tries again; the summary line says when the gateway does not answer
  }
}

// for tests: the page's last look, its change log and its charts
(globalThis as unknown as { strataNetwork: unknown }).strataNetwork = {
  get state() {
    return last;
  },
  get changes() {
    return log.map((e) => e.change);
  },
  get charts() {
    return chartsShown();
  },
};
void tick();
setInterval(() => void tick(), 1000);
void loadTick();
setInterval(() => void loadTick(), 2000);
