// Chaos: nodes killed at random while streamed chats run, and the routes repair themselves.
// `strata up --routes 2` plus a relay-only spare for each range (with `tab`, a headless tab
// holds the first range in place of its spare); the same chats first run without failures (the reference),
// then again while `kills` nodes die one at a time (kill -9, or the tab closed): a first
// node, a last node, a relay-only node, then any, never the last holder of a range. Every
// chat must finish without an error event, equal to its reference (greedy and seeded draws
// alike: the nodes run batch-invariant kernels; beside a tab, greedy only and by the
// near-tie rule), and every node must end with no sessions.
// Used by the suite (small) and by `strata bench chaos`.
import { parseLayerRange } from "../../src/engine/layer-range.ts";
import type { RepairRecord } from "../../src/gateway/repair.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { trackedNodeArgs } from "../../server/up/node-args.ts";
import { openVolunteerTab, type VolunteerTab } from "../../server/browser/volunteer-tab.ts";
import { streamChat, type Streamed } from "../parity/chat-client.ts";
import { CHAT_QUESTIONS, chatReference } from "../parity/chat-reference.ts";
import { defaultModelPath } from "../../server/model/fetch.ts";

export interface ChaosOptions {
  readonly kills: number;
  readonly sessions: number;
  readonly tokens: number;
  /** a headless tab holds the first range in place of its spare, and is the first kill (closed) */
  readonly tab?: boolean;
  /** the tracker is killed too, halfway (strata up starts it again at the same address) */
  readonly restartTracker?: boolean;
  /**
   * at the end, the gateway is killed under 4 streams (strata up starts it again): its
   * sessions must end on every node, and the new one must serve
   */
  readonly restartGateway?: boolean;
  /** sessions each node takes at once (the nodes' default when absent) */
  readonly maxSessions?: number;
  /** repairs re-prefill whole routes (strata up --no-repair-resume): the figures to compare with */
  readonly wholeRoute?: boolean;
  /** progress lines go here */
  readonly say?: (line: string) => void;
}

interface Member {
  readonly node: string;
  readonly range: string;
  readonly relayOnly: boolean;
  readonly sessions: number;
}

interface Kill {
  readonly node: string;
  readonly kind: KillKind;
  readonly range: string;
  readonly relayOnly: boolean;
  /** sessions the tracker counted on it as it died */
  readonly sessions: number;
  readonly at: number;
}

/** The kinds of node killed, in turn (the last repeats). */
const KINDS = ["first", "last", "relay", "any"] as const;
type KillKind = typeof KINDS[number] | "tab";

export async function runChaos(o: ChaosOptions) {
  const say = o.say ?? (() => {});
  const nodeToken = crypto.randomUUID();
  const relaySecret = crypto.randomUUID();
  const procs: ServiceProcess[] = [];
  let tab: VolunteerTab | undefined;
  const net = await ServiceProcess.start(
    "strata up",
    [
      "up",
      "--routes",
      "2",
      "--port",
      "0",
      "--lease-ms",
      "3000",
      // a session slot on every layer stays free of new chats, for the repairs
      "--repair-reserve",
      "1",
      ...(o.wholeRoute ? ["--no-repair-resume"] : []),
      ...(o.maxSessions ? ["--max-sessions", String(o.maxSessions)] : []),
    ],
    { STRATA_NODE_TOKEN: nodeToken, STRATA_RELAY_SECRET: relaySecret },
    600_000,
  );
  const gateway = String(net.ready.gateway);
  const trackerUrl = String(net.ready.tracker);
  const model = String(net.ready.model);
  const upNodes = net.ready.nodes as Array<{ name: string; layers: string; pid: number }>;
  const tracker = trackerClient(trackerUrl);
  const seams = new GrpcSeams();
  try {
    // a relay-only spare for every range of the split; beside a tab, the tab is the first
    // range's spare: three holders a range make three disjoint routes, so the tab is on one
    // of them and carries sessions when it is closed (a fourth holder could be left out)
    const ranges = [...new Set(upNodes.map((n) => n.layers))];
    const spares = new Map<string, ServiceProcess>();
    for (const r of ranges.slice(o.tab ? 1 : 0)) {
      const name = `spare-${r.replace(":", "-")}`;
      const args = await trackedNodeArgs({
        model: "smollm2",
        range: parseLayerRange(r, 1 << 16),
        name,
        tracker: trackerUrl,
        nodeToken,
        relay: String(net.ready.relay),
        relaySecret,
        threads: 1,
      });
      const p = await ServiceProcess.start(
        name,
        [...args.args, ...(o.maxSessions ? ["--max-sessions", String(o.maxSessions)] : [])],
        args.env,
      );
      procs.push(p);
      spares.set(name, p);
    }
    if (o.tab) {
      tab = await openVolunteerTab(gateway, { layers: ranges[0], threads: 1 });
      const s = await tab.contribute();
      if (s.phase !== "serving") throw new Error(`the tab did not serve: ${s.phase}`);
    }
    const expected = upNodes.length + spares.size + (tab ? 1 : 0);
    // (the tracker may be restarting: ask until it answers)
    const nodes = async () => {
      for (let i = 0;; i++) {
        try {
          return (await tracker.client.nodes({}, { timeoutMs: 5000 })).nodes;
        } catch (e) {
          if (i >= 300) throw e;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    };
    const members = async (): Promise<Member[]> =>
      (await nodes())
        .filter((n) => n.live && n.admission === "admitted")
        .map((n) => ({
          node: n.node,
          range: `${n.shard!.range!.start}:${n.shard!.range!.end}`,
          relayOnly: n.urls.every((u) => u.startsWith("relay+")),
          sessions: n.sessions,
        }));
    for (let i = 0; (await members()).length < expected; i++) {
      if (i > 600) throw new Error("not every node was admitted within a minute");
      await new Promise((r) => setTimeout(r, 100));
    }
    const tabName = tab ? (await tab.state()).name : undefined;
    say(
      `network: ${
        (await members()).map((m) => `${m.node} ${m.range}${m.relayOnly ? " (relay)" : ""}`).join(", ")
      }`,
    );

    const body = (i: number) => ({
      model,
      messages: [{ role: "user", content: CHAT_QUESTIONS[i % CHAT_QUESTIONS.length] }],
      max_tokens: o.tokens,
      // half greedy, half the position-seeded draw; all greedy beside a tab (another engine:
      // its answers are held to whole-model llama.cpp's by the near-tie rule)
      ...(i % 2 && !o.tab ? { temperature: 0.8, seed: 100 + i } : { temperature: 0 }),
    });
    const whole = o.tab ? await chatReference(defaultModelPath(), CHAT_QUESTIONS, o.tokens) : undefined;
    const nearTie = whole &&
      ((i: number, text: string) => {
        const q = i % CHAT_QUESTIONS.length;
        return text === whole.texts[q] || whole.divergence(q, text).nearTie;
      });
    const all = (onToken?: () => void) =>
      Promise.all(Array.from({ length: o.sessions }, (_, i) => streamChat(gateway, {}, body(i), onToken)));

    // the gateway killed under 4 streams: every node frees their sessions, the gateway is
    // started again and serves
    const killGateway = async () => {
      const streams = Array.from(
        { length: 4 },
        (_, i) => streamChat(gateway, {}, { ...body(i), max_tokens: 400 }).catch((e) => String(e)),
      );
      for (let i = 0; i < 100 && (await members()).every((m) => m.sessions === 0); i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      const at = performance.now();
      Deno.kill(Number(net.ready.gateway_pid), "SIGKILL");
      say("  killed the gateway");
      await Promise.all(streams);
      let backMs = -1;
      while (backMs < 0 && performance.now() - at < 60_000) {
        const up = await fetch(`${gateway}/v1/models`).then((r) => r.ok, () => false);
        if (up) backMs = performance.now() - at;
        else await new Promise((r) => setTimeout(r, 100));
      }
      let freedMs = -1;
      while (freedMs < 0 && performance.now() - at < 60_000) {
        if ((await members()).every((m) => m.sessions === 0)) freedMs = performance.now() - at;
        else await new Promise((r) => setTimeout(r, 100));
      }
      const kv = await Promise.all(
        (await nodes()).filter((n) => n.live && !kills.some((k) => k.node === n.node))
          .flatMap((n) => n.urls.filter((u) => u.startsWith("http")))
          .map(async (u) => {
            const i = await seams.info(u, 5000);
            // what a node keeps of finished chats (prefix entries) is not a session's
            return i.kvCellsUsed - Math.min(i.kvCellsUsed, i.prefix?.cells ?? 0);
          }),
      );
      const after = await streamChat(gateway, {}, body(0));
      return {
        back_ms: Math.round(backMs),
        sessions_freed_ms: Math.round(freedMs),
        kv_cells_used: kv,
        serves_after: after.done && !after.error && after.text.length > 0,
      };
    };

    say("reference: the chats with every node up");
    const reference = await all();
    const pieces = reference.reduce((n, r) => n + r.pieceAt.length, 0);

    say(`chaos: the same chats while ${o.kills} nodes die`);
    const kills: Kill[] = [];
    let seen = 0;
    let killing = Promise.resolve();
    const kill = async (k: number) => {
      // a node killed a moment ago is still live to the tracker until its lease lapses
      const now = (await members()).filter((m) => !kills.some((x) => x.node === m.node));
      const holders = (range: string) => now.filter((m) => m.range === range).length;
      const kinds: readonly KillKind[] = o.tab ? ["tab", ...KINDS] : KINDS;
      const kind = kinds[Math.min(k, kinds.length - 1)];
      const last = ranges.at(-1)!;
      const fits = (m: Member) =>
        holders(m.range) > 1 && (
          kind === "tab"
            ? m.node === tabName
            : kind === "first"
            ? m.range === ranges[0] && !m.relayOnly
            : kind === "last"
            ? m.range === last && !m.relayOnly
            : kind === "relay"
            ? m.relayOnly
            : true
        );
      // the busiest of its kind (a kill that hits no session shows nothing): wait a little
      // for one of its kind to carry a session
      for (let i = 0; i < 50 && !now.some((m) => fits(m) && m.sessions > 0); i++) {
        await new Promise((r) => setTimeout(r, 100));
        const fresh = await members();
        now.splice(0, now.length, ...fresh.filter((m) => !kills.some((x) => x.node === m.node)));
      }
      const victim = now.filter(fits).sort((a, b) => b.sessions - a.sessions)[0] ??
        now.filter((m) => holders(m.range) > 1).sort((a, b) => b.sessions - a.sessions)[0];
      if (!victim) return;
      const at = performance.now();
      if (victim.node === tabName) await tab!.close();
      else if (spares.has(victim.node)) Deno.kill(spares.get(victim.node)!.child.pid, "SIGKILL");
      else Deno.kill(upNodes.find((n) => n.name === victim.node)!.pid, "SIGKILL");
      if (victim.node === tabName) tab = undefined;
      if (k === 1) setTimeout(() => leaver.abort(), 50);
      kills.push({ ...victim, kind, at });
      say(
        `  killed ${victim.node} ${victim.range}${
          victim.relayOnly ? " (relay)" : ""
        }, ${victim.sessions} sessions`,
      );
    };
    // one more client leaves right as the second node dies (maybe while its route is being
    // repaired): nothing of it may stay on any node
    const leaver = new AbortController();
    const leaving = streamChat(gateway, {}, body(0), undefined, leaver.signal).catch(() => undefined);
    let started = 0;
    let trackerKilled: Promise<number> | undefined;
    const killTracker = async () => {
      const at = performance.now();
      Deno.kill(Number(net.ready.tracker_pid), "SIGKILL");
      say("  killed the tracker");
      await nodes();
      return performance.now() - at;
    };
    const chaos = await all(() => {
      seen++;
      if (o.restartTracker && !trackerKilled && seen * 2 >= pieces) trackerKilled = killTracker();
      // kill k once (k+1)/(kills+1) of the reference's tokens have come, one at a time
      const due = Math.min(o.kills, Math.floor((seen * (o.kills + 1)) / pieces));
      while (started < due) {
        const k = started++;
        killing = killing.then(() => kill(k));
      }
    });
    await killing;
    leaver.abort();
    await leaving;
    const trackerBackMs = trackerKilled ? await trackerKilled : undefined;

    // every node still up ends with no sessions (the tracker's count of each) and, for nodes
    // it can reach directly, no KV cells in use
    let left: Member[] = [];
    for (let i = 0; i < 100; i++) {
      left = (await members()).filter((m) => m.sessions > 0);
      if (left.length === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const direct = (await nodes())
      .filter((n) => n.live && !kills.some((k) => k.node === n.node))
      .flatMap((n) => n.urls.filter((u) => u.startsWith("http")).map((u) => ({ node: n.node, url: u })));
    const kvCells = await Promise.all(
      direct.map(async (d) => {
        const i = await seams.info(d.url, 5000);
        // KV beyond what the node keeps of finished chats (prefix entries)
        return { node: d.node, kvCellsUsed: i.kvCellsUsed - Math.min(i.kvCellsUsed, i.prefix?.cells ?? 0) };
      }),
    );
    const gatewayRestart = o.restartGateway ? await killGateway() : undefined;
    return {
      ...summarize(reference, chaos, kills, { left, kvCells }, nearTie),
      gateway_restart: gatewayRestart ?? null,
      // killed once halfway: how long until it answered again
      tracker_back_ms: trackerBackMs === undefined ? null : Math.round(trackerBackMs),
    };
  } finally {
    seams.close();
    tracker.close();
    await tab?.close().catch(() => {});
    for (const p of procs.reverse()) await p.stop().catch(() => {});
    await net.stop();
  }
}

function summarize(
  reference: Streamed[],
  chaos: Streamed[],
  kills: Kill[],
  end: { left: Member[]; kvCells: Array<{ node: string; kvCellsUsed: number }> },
  /** across engines: whether a greedy text is whole-model llama.cpp's, but for near-ties */
  nearTie?: (i: number, text: string) => boolean,
) {
  const same = chaos.map((c, i) => c.text === reference[i].text);
  const tied = chaos.map((c, i) => !same[i] && !!nearTie?.(i, c.text) && !!nearTie?.(i, reference[i].text));
  const wrong = chaos.map((c, i) => same[i] || tied[i] ? 0 : wrongPieces(reference[i], c));
  const repairs = chaos.flatMap((c) => c.repairs);
  // kill → the next token of each chat the dead node carried
  const recover: number[] = [];
  for (const k of kills) {
    for (const c of chaos) {
      if (!c.repairs.some((r) => r.nodes.includes(k.node))) continue;
      const next = c.pieceAt.find((t) => t > k.at);
      if (next !== undefined) recover.push(next - k.at);
    }
  }
  return {
    requests: chaos.length,
    errors: chaos.filter((c) => c.error || !c.done || c.status !== 200).length,
    wrong_tokens: wrong.reduce((a, b) => a + b, 0),
    // chats that differ from the run without failures only where whole-model llama.cpp itself
    // was within 0.5 σ of another token (routes through the tab run another engine)
    near_ties: tied.filter(Boolean).length,
    repairs: repairs.length,
    recover_ms_p50: percentile(recover, 0.5),
    recover_ms_p95: percentile(recover, 0.95),
    replayed_positions_mean: repairs.length
      ? repairs.reduce((n, r) => n + r.replayed_positions, 0) / repairs.length
      : 0,
    // the work a repair redid: positions × layers computed again
    replayed_layer_positions_mean: repairs.length
      ? repairs.reduce((n, r) => n + r.layer_positions_rebuilt, 0) / repairs.length
      : 0,
    // failure → first token of the new route, by how the repair rebuilt the session
    recover_ms_whole_route_p50: percentile(
      repairs.filter((r) => r.kind === "whole_route").map((r) => r.ms),
      0.5,
    ),
    recover_ms_lost_hop_p50: percentile(repairs.filter((r) => r.kind === "lost_hop").map((r) => r.ms), 0.5),
    repairs_lost_hop: repairs.filter((r) => r.kind === "lost_hop").length,
    repairs_whole_route: repairs.filter((r: RepairRecord) => r.kind === "whole_route").length,
    whole_route_why: repairs.flatMap((r) => r.whole_route_why ?? []),
    kills: kills.map(({ at: _, ...k }) => k),
    chats: chaos.map((c, i) => ({
      same: same[i],
      nearTie: tied[i],
      error: c.error ?? null,
      done: c.done,
      repairs: c.repairs.map((r) => ({
        nodes: r.nodes,
        ms: Math.round(r.ms),
        kind: r.kind,
        route_ms: Math.round(r.route_ms),
        open_ms: Math.round(r.open_ms),
        whole_route_why: r.whole_route_why,
        hops_rebuilt: r.hops_rebuilt,
        replayed: r.replayed_positions,
      })),
    })),
    sessions_left: end.left.map((m) => ({ node: m.node, sessions: m.sessions })),
    kv_cells_used: end.kvCells,
  };
}

/** Pieces of the chaos text from where it first differs from the reference. */
function wrongPieces(ref: Streamed, got: Streamed): number {
  let i = 0;
  while (i < ref.text.length && ref.text[i] === got.text[i]) i++;
  // pieces are not kept apart; count the reference's share of characters as pieces
  const perPiece = ref.text.length / Math.max(1, ref.pieceAt.length);
  return Math.max(1, Math.round((Math.max(ref.text.length, got.text.length) - i) / Math.max(1, perPiece)));
}

function percentile(xs: number[], q: number): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))]);
}
