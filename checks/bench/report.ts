// The benchmark's markdown report and its plots (SVG, rendered by vega from vega-lite specs).
import * as vega from "vega";
import * as vl from "vega-lite";
import type { CheckResult } from "./contract.ts";
import { formatChecks } from "./contract.ts";
import type { SuiteReport } from "./suite.ts";
import type { HostsReport } from "./hosts.ts";
import type { EngineFigures } from "./figures.ts";
import type { SweepReport } from "../parity/sweep.ts";

async function svg(spec: vl.TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: "none" });
  return await view.toSVG();
}

/** Aggregate decode throughput against sessions at once, the whole model's 1 and 8 beside it. */
export function concurrencyPlot(r: SuiteReport): Promise<string> {
  const values = [
    ...r.concurrency.map((c) => ({
      sessions: c.sessions,
      tps: c.aggregate_tps,
      series: "Strata route of 2",
    })),
    { sessions: 1, tps: r.whole_batched.sessions_1_tps, series: "whole model, one batch" },
    { sessions: 8, tps: r.whole_batched.sessions_8_tps, series: "whole model, one batch" },
  ];
  return svg({
    $schema: "https://vega.github.io/schema/vega-lite/v5.json",
    title: `Throughput against concurrency (${r.model}, route ${r.route2.split})`,
    width: 420,
    height: 260,
    data: { values },
    mark: { type: "line", point: true },
    encoding: {
      x: {
        field: "sessions",
        type: "quantitative",
        scale: { type: "log", base: 2 },
        title: "sessions at once",
      },
      y: { field: "tps", type: "quantitative", title: "decode tokens/s (all sessions)" },
      color: {
        field: "series",
        type: "nominal",
        title: null,
        legend: { orient: "top-left", labelLimit: 300 },
      },
    },
  });
}

/** Decode tokens/s of one session on every system, whole model first. */
export function decodePlot(r: SuiteReport): Promise<string> {
  const values = [
    { system: "whole model (llama.cpp)", tps: r.whole.decode_tps },
    { system: `Strata route of 2`, tps: r.route2.decode_tps },
    { system: `Strata route of 3`, tps: r.route3.decode_tps },
    { system: "llama.cpp RPC, 2 servers", tps: r.rpc2.decode_tps },
    { system: "WASM engine, whole", tps: r.wasm.decode_tps },
  ];
  return svg({
    $schema: "https://vega.github.io/schema/vega-lite/v5.json",
    title:
      `Decode, one session (${r.model}, ${r.machine.threads_per_engine_process} thread(s) an engine process)`,
    width: 420,
    height: 200,
    data: { values },
    mark: "bar",
    encoding: {
      y: { field: "system", type: "nominal", sort: null, title: null, axis: { labelLimit: 300 } },
      x: { field: "tps", type: "quantitative", title: "decode tokens/s" },
    },
  });
}

const f = (x: number | undefined, d = 1) => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(d));

export function markdownReport(
  r: SuiteReport,
  hosts: HostsReport | undefined,
  checks: CheckResult[],
  parity?: SweepReport,
): string {
  const row = (name: string, s: EngineFigures) =>
    `| ${name} | ${f(s.ttft_ms)} | ${f(s.prefill_tps)} | ${f(s.decode_tps)} | ${f(s.p50_ms, 2)} | ${
      f(s.p95_ms, 2)
    } | ${f(s.rss_mb)} |`;
  const profile = (name: string, p: SuiteReport["route2"]["profile"]) =>
    `| ${name} | ${f(p.step_ms, 2)} | ${f(p.engine_ms, 2)} | ${f(p.scheduling_ms, 2)} | ${
      f(p.seam_codec_ms, 3)
    } | ${f(p.transport_ms, 2)} | ${p.one_way_crossings} | ${f(p.crossing_ms_p50, 3)} | ${
      p.transports.join(" → ")
    } | ${p.crossing_ms_by_link.map((x) => f(x, 3)).join(", ")} | ${
      p.node_ms_beyond_engine.map((x) => f(x, 3)).join(", ")
    } |`;
  const lines = [
    `# Strata benchmark: ${r.model}`,
    "",
    `${r.machine.cores} cores, ${r.machine.threads_per_engine_process} engine thread(s) in every engine process, ` +
    `prompt ${r.prompt_tokens} tokens, ${r.decode_tokens} greedy decode steps, one session unless said; ` +
    `${f(r.seconds, 0)} s in all.`,
    "",
    "| system | TTFT ms | prefill tok/s | decode tok/s | p50 ms | p95 ms | RSS MB |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    row("whole model (llama.cpp, same pin)", r.whole),
    row(`Strata route of 2 (${r.route2.split})`, r.route2),
    row(`Strata route of 3 (${r.route3.split})`, r.route3),
    row(`llama.cpp RPC (${r.rpc2.split})`, r.rpc2),
    row("WASM engine, whole", r.wasm),
    "",
    "![decode](decode.svg)",
    "",
    ...pinnedSection(r),
    "## Ratios, unpinned (pair by pair, this run; information, not checks)",
    "",
    ...Object.entries(r.ratios).map(([k, v]) => `- ${k}: ${f(v, 3)}`),
    "",
    ...turnsSection(r),
    "## Concurrency (route of 2)",
    "",
    "| sessions | aggregate tok/s | × one session | largest batch |",
    "| --- | --- | --- | --- |",
    ...r.concurrency.map((c) =>
      `| ${c.sessions} | ${f(c.aggregate_tps)} | ${
        f(c.aggregate_tps / r.concurrency[0].aggregate_tps, 2)
      } | ${c.max_batch_sessions} |`
    ),
    "",
    `Whole-model llama.cpp, the same engine threads, 8 sessions in one batch against 1: ${
      f(r.whole_batched.sessions_8_tps)
    } against ${f(r.whole_batched.sessions_1_tps)} tok/s (${
      f(r.whole_batched.gain_8_vs_1, 2)
    }×), the engine's own batching gain here; with the route's ${r.whole_batched.threads_route} threads together, ${
      f(r.whole_batched.sessions_8_tps_route_threads)
    } tok/s for 8 sessions. The route of 2 runs 8 sessions as two cohorts of 4, one on each node at a time: its engines do the work of two whole-model processes at 4 sessions each, at once, which gave ${
      r.whole_batched.two_processes_4_tps.map((x) => f(x)).join(" + ")
    } = ${f(r.whole_batched.route2_ceiling_8_tps)} tok/s (${
      f(r.ratios.agg8_ceiling_vs_whole8_same_threads, 3)
    }× the whole model on the route's threads; one such process alone: ${
      f(r.whole_batched.sessions_4_tps)
    } tok/s). The route gave ${f(r.ratios.agg8_route2_vs_ceiling, 3)}× that ceiling.`,
    "",
    ...r.concurrency_lockstep.map((c) =>
      `${c.sessions} sessions with cohorts against nodes without them (lockstep), ${c.runs.length} runs of each in turn: ${
        c.runs.map((x) => `${f(x.cohorts)} / ${f(x.lockstep)}`).join(", ")
      } tok/s; medians ${f(c.cohorts_tps)} / ${f(c.aggregate_tps)} (${
        f(c.cohorts_tps / c.aggregate_tps, 3)
      }×).`
    ),
    "",
    "![concurrency](concurrency.svg)",
    "",
    "## Where a decode step goes (p50)",
    "",
    "| route | step ms | engine ms | scheduling ms | seam codec ms | transport ms | one-way crossings | ms a crossing | links | each crossing ms (stamped) | each node's own ms |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    profile("2 shards", r.route2.profile),
    profile("3 shards", r.route3.profile),
    "",
    `A hidden-state frame's codec alone (encode, decode, check, unpack): ${
      f(r.route2.profile.codec_ms_per_frame_alone, 4)
    } ms.`,
    "",
    "Per node (route of 2): " +
    r.route2.nodes.map((n) =>
      `${n.layers} ${f(n.compute_ms_per_token, 2)} ms compute, ${f(n.queue_ms_per_token, 2)} ms queue, ${
        f(n.rss_mb)
      } MB`
    ).join("; ") + `. Seam bytes per token: ${r.seam_bytes_per_token}.`,
    "",
    `Gateway (strata up, ${r.gateway.split}), pinned, in turns with the route's own prefill: TTFT p50 ` +
    `${f(r.gateway.ttft_ms_p50)} ms against a budget of ${
      f(r.gateway.ttft_budget_ms)
    } ms (1.1 × the route's own ` +
    `${f(r.gateway.route_ttft_ms_p50)} ms + 5 ms). Unpinned, against whole-model prefill: ${
      f(r.gateway.unpinned.ttft_ms_p50)
    } ms, whole ${f(r.gateway.unpinned.whole_prefill_ms_p50)} ms.`,
    "",
  ];
  const rt = (x: { p50_ms: number; p95_ms: number }) => `${f(x.p50_ms, 3)} / ${f(x.p95_ms, 3)}`;
  // (absent from runs before TLS: --from an older bench.json)
  const t = r.transport as SuiteReport["transport"] | undefined;
  if (t) {
    lines.push(
      `## Seam transports alone (round trips of a ${t.idle.frame_bytes}-byte decode frame, ms p50 / p95)`,
      "",
      "| machine | fast seam | fast seam, TLS | gRPC (h2c) | gRPC, TLS | WebSocket | TCP | TLS a crossing: fast seam | TLS a crossing: gRPC |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
      ...([["idle", t.idle], ["one core busy", t.one_core_busy]] as const).map(([name, x]) =>
        `| ${name} | ${rt(x.fast_seam)} | ${rt(x.fast_seam_tls)} | ${rt(x.grpc_http2)} | ${
          rt(x.grpc_http2_tls)
        } | ${rt(x.websocket)} | ${rt(x.tcp)} | ${f(x.tls_ms_per_crossing.fast_seam, 4)} | ${
          f(x.tls_ms_per_crossing.grpc, 4)
        } |`
      ),
      "",
      "Plaintext and TLS streams take turns, one round trip each, so both meet the same noise; what TLS adds to " +
        "one crossing is half the difference of their p50 round trips.",
      "",
    );
    // (absent from runs before 2026-12-02)
    const a = t.after_idle as typeof t.after_idle | undefined;
    if (a) {
      lines.push(
        `## A crossing's code back to back and after ${a.gap_ms} ms idle (ms p50 / p95)`,
        "",
        "| when | fast seam round trip | TCP round trip | encode a frame | decode and check a frame |",
        "| --- | --- | --- | --- | --- |",
        ...([["back to back", a.back_to_back], [`after ${a.gap_ms} ms idle`, a.after_gap]] as const).map((
          [name, x],
        ) => `| ${name} | ${rt(x.fast_seam)} | ${rt(x.tcp)} | ${rt(x.encode)} | ${rt(x.decode)} |`),
        "",
        "A shard of a route runs this code once a step, after idling while the other shard computes: a crossing " +
          "in a route pays the second row, not the first.",
        "",
      );
    }
  }
  lines.push(
    "## q8 row transport on seams (against f32)",
    "",
    "| scales | split | seam after layer | one quantization: max rel. error | one quantization: ‖Δ‖/‖h‖ | q8 chain vs f32 at the seam, max rel. error |",
    "| --- | --- | --- | --- | --- | --- |",
    ...r.seam_compression_q8.flatMap((q) =>
      q.seams.map((s) =>
        `| ${q.kind} | ${q.split} | ${s.after_layer} | ${s.q8_step_rel_err_max.toExponential(2)} | ${
          s.q8_step_rms_rel_err_max.toExponential(2)
        } | ${s.q8_vs_f32_rel_err_max.toExponential(2)} |`
      )
    ),
    "",
    ...r.seam_compression_q8.map((q) =>
      `- ${q.kind}, ${q.split}: logits max |Δ| ${
        f(q.logits_max_diff_sigma, 3)
      } σ; greedy tokens identical for ${
        q.sessions.map((s) => s.identical_steps).join(", ")
      } of ${q.steps} steps${
        q.sessions.some((s) => s.divergence)
          ? ` (divergences at top-2 gaps ${
            q.sessions.filter((s) => s.divergence).map((s) =>
              f(s.divergence!.gapSigma, 3)
            ).join(", ")
          } σ)`
          : ""
      }; ${q.bytes_per_row.f32} → ${q.bytes_per_row.q8} bytes a row (${f(q.bytes_per_row.ratio, 2)}× less)`
    ),
    "",
  );
  if (hosts) {
    lines.push(
      "## Separate hosts (network namespaces, one-way delay per link)",
      "",
      "| delay ms | decode tok/s | engine ms a token | budget tok/s (1 / (engine + crossings × delay)) | × budget | llama.cpp RPC tok/s, same split and hosts | route / RPC |",
      "| --- | --- | --- | --- | --- | --- | --- |",
      ...hosts.runs.map((h) =>
        `| ${h.delay_ms} | ${f(h.decode_tps)} | ${f(h.engine_ms_per_token, 2)} | ${f(h.budget_tps)} | ${
          f(h.vs_budget, 2)
        } | ${f(h.rpc_decode_tps)} | ${f(h.route_vs_rpc, 2)} |`
      ),
      "",
      "llama.cpp RPC across hosts: each rpc-server on a host of its own behind the same delay link, llama-server",
      "dialing them from the harness's namespace. Its decode pays the delay on every round trip to a server; the",
      "route's, once a crossing.",
      "",
    );
  }
  lines.push(...paritySection(parity));
  lines.push("## Contract (checks/bench/contract.json)", "", "```", formatChecks(checks), "```", "");
  return lines.join("\n");
}

/** The parity sweep (strata bench parity): each case's verdict and figures. */
function paritySection(s: SweepReport | undefined): string[] {
  if (!s) return [];
  const e2 = (x: number) => x.toExponential(2);
  return [
    "## Parity sweep (strata bench parity)",
    "",
    `Each split against whole-model llama.cpp on ${s.backend}, ${s.sessions} sessions × ${s.tokens} greedy steps ` +
    `alone and batched, one released halfway; ${s.threads} engine threads a process. ` +
    `**${s.passed} of ${s.cases.length} cases pass** in ${f(s.seconds, 0)} s.`,
    "",
    "| verdict | model | split | greedy steps compared | seams max \\|Δ\\| | logits max \\|Δ\\| | batched | release | s |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...s.cases.map((c) => {
      const p = c.report;
      const cells = c.expected === "refused" && c.pass ? [`refused: ${c.refusal}`, "", "", "", ""] : p
        ? [
          `${p.tokens_compared} ${
            p.tokens_match ? "identical" : p.tokens_agree ? "to near-ties" : "MISMATCH"
          }`,
          p.max_abs_diff_hidden.map((x) => e2(x.diff)).join(", "),
          e2(p.max_abs_diff_logits),
          p.batched_match ? "match" : "MISMATCH",
          p.release_ok ? "exact" : "WRONG",
        ]
        : [c.failures.join("; "), "", "", "", ""];
      return `| ${c.pass ? "PASS" : "**FAIL**"} | ${c.model} | ${c.split} | ${cells.join(" | ")} | ${
        f(c.seconds)
      } |`;
    }),
    "",
    ...s.cases.filter((c) => !c.pass && c.report).map((c) =>
      `- ${c.model} ${c.split} failed: ${c.failures.join("; ")}`
    ),
    "",
  ];
}

/** The contract's lanes: every engine process on one core, in turns. */
function pinnedSection(r: SuiteReport): string[] {
  const p = r.pinned as SuiteReport["pinned"] | undefined;
  if (!p) return [];
  const lanes = Object.keys(p.tps);
  return [
    "## The contract's lanes (each engine process on one core, in turns)",
    "",
    `Cores: ${
      Object.entries(p.cpus).map(([k, v]) => `${k} on ${v}`).join("; ")
    }. ${p.rounds.length} rounds ` +
    "of one session a lane, the lane going first moving on each round; medians.",
    "",
    `| round | ${lanes.join(" | ")} |`,
    `|${" --- |".repeat(lanes.length + 1)}`,
    ...p.rounds.map((x, i) =>
      `| ${i + 1} | ${lanes.map((l) => f((x as Record<string, number>)[l])).join(" | ")} |`
    ),
    `| median | ${lanes.map((l) => f((p.tps as Record<string, number>)[l])).join(" | ")} |`,
    "",
    p.same_tokens
      ? "Every route lane decoded W1's greedy tokens in every round."
      : "**A route lane's greedy tokens differed from W1's in some round.**",
    "",
    `A step (p50 of round medians): W1's engine ${f(p.step.w1_engine_ms, 3)} ms; R2's step ` +
    `${f(p.step.r2_step_ms, 3)} ms, its engines ${f(p.step.r2_engine_ms, 3)} ms, a crossing ` +
    `${f(p.step.r2_crossing_ms, 3)} ms (with both nodes and the driver on one core: ${
      f(p.step.one_core_crossing_ms, 3)
    } ms; with the nodes' cores left to idle between steps: engines ${
      f(p.step.cores_idle_engine_ms, 3)
    } ms, a crossing ${f(p.step.cores_idle_crossing_ms, 3)} ms); R3's engines ${
      f(p.step.r3_engine_ms, 3)
    } ms, ` +
    `a crossing ${f(p.step.r3_crossing_ms, 3)} ms. ` +
    `Floor: one way on loopback TCP between the cores after ${p.floor.gap_ms} ms idle ${
      f(p.floor.one_way_ms, 3)
    } ms (back to back ${f(p.floor.one_way_ms_back_to_back, 3)} ms).`,
    "",
    `8 sessions on ${p.many.split} against C2, ${p.many.runs.length} runs each in turn: ` +
    p.many.runs.map((x) => `${f(x.r2)} / ${f(x.c2)}`).join(", ") +
    ` tok/s; median ratio ${f(p.many.r2_vs_c2, 3)}. The same route's nodes without batch invariance (C2's ` +
    `kernels): ${p.many.runs.map((x) => f(x.r2_not_invariant)).join(", ")} tok/s, ${
      f(p.many.r2_not_invariant_vs_c2, 3)
    } of C2. The nodes' CPU beside their engines: ${
      f(p.many.cpu_beyond_engine_ms_per_token, 3)
    } ms a token against ${
      f(p.many.engine_ms_per_token, 3)
    } ms in the engines (their keep-awake spinners took ${
      f(p.many.spinner_ms_per_token, 3)
    } ms a token of the cores' idle time).`,
    "",
    "| node | peak RSS MB | weights MB | KV MB (cells) | compute MB | beyond MB |",
    "| --- | --- | --- | --- | --- | --- |",
    ...p.memory.map((m) =>
      `| ${m.layers} | ${f(m.peak_rss_mb)} | ${f(m.weights_mb)} | ${f(m.kv_mb)} (${m.kv_cells}) | ${
        f(m.compute_mb)
      } | ${f(m.beyond_mb)} |`
    ),
    "",
  ];
}

/** One session on the whole model and both routes in turns, round by round. */
function turnsSection(r: SuiteReport): string[] {
  // (absent from runs before 2026-12-04's turns: --from an older bench.json)
  const t = r.turns as SuiteReport["turns"] | undefined;
  if (!t) return [];
  const lane = (i: number) => i === 0 ? "whole" : t.routes[i - 1];
  return [
    "## One session in turns (the route ratios the contract checks)",
    "",
    `Each round decodes one session on the whole model and on the routes ${
      t.routes.join(" and ")
    }, one after another ` +
    "(the lane going first moves on each round); a round's ratio is the route's decode tok/s over the whole " +
    "model's in the same round, and the run's ratio is the median of its rounds. The ratios `…_one_pass` " +
    "above compare the table's lanes, measured minutes apart.",
    "",
    `| round | first | whole tok/s | ${t.routes.map((x) => `${x} tok/s`).join(" | ")} | ${
      t.routes.map((x) => `${x} / whole`).join(" | ")
    } |`,
    `|${" --- |".repeat(3 + 2 * t.routes.length)}`,
    ...t.rounds.map((x, i) =>
      `| ${i + 1} | ${lane(x.first)} | ${f(x.whole_tps)} | ${x.routes_tps.map((v) => f(v)).join(" | ")} | ${
        t.ratios_by_round.map((xs) => f(xs[i], 3)).join(" | ")
      } |`
    ),
    `| median | | |${" |".repeat(t.routes.length)} ${t.ratios.map((v) => f(v, 3)).join(" | ")} |`,
    "",
    t.same_tokens
      ? "Every lane decoded the whole model's greedy tokens in every round."
      : "**The lanes' greedy tokens differed in some round**: the routes did not decode what the whole model did.",
    "",
  ];
}
