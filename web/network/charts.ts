// The network page's charts of the gateway's load (uPlot): tokens/s, TTFT p50 and p95, the
// request queue's depth, and each node's busy share, over the last ten minutes.
import uPlot from "uplot";
import type { LoadSeries } from "../../src/gateway/load-history.ts";

const COLORS = ["#2f6fdb", "#d9822b", "#2e9d61", "#a3202b", "#7b4fc9", "#1f8a99", "#b5486e", "#6b7280"];

interface Chart {
  plot?: uPlot;
  /** the series names it was made with: a new node makes it again */
  names: string;
}

const charts = new Map<string, Chart>();

function draw(id: string, title: string, unit: string, names: string[], data: uPlot.AlignedData): void {
  const el = document.getElementById(id)!;
  const key = names.join("|");
  let c = charts.get(id);
  if (!c || c.names !== key) {
    c?.plot?.destroy();
    const width = Math.max(300, el.clientWidth - 12);
    const plot = new uPlot(
      {
        title,
        width,
        height: 200,
        // room for the value labels, so none is cut off
        axes: [{}, { label: unit, size: 64 }],
        scales: { x: { time: true } },
        series: [{}, ...names.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: 1.5 }))],
      },
      data,
      el,
    );
    c = { plot, names: key };
    charts.set(id, c);
  } else {
    c.plot!.setData(data);
  }
}

export function drawLoad(s: LoadSeries): void {
  draw("chart-tokens", "Tokens per second", "tok/s", ["tokens/s"], [s.t, s.tokensPerS]);
  draw("chart-ttft", "Time to first token (30 s window)", "ms", ["p50", "p95"], [
    s.t,
    s.ttftP50Ms,
    s.ttftP95Ms,
  ]);
  draw("chart-queue", "Requests waiting for a route", "requests", ["queue depth"], [s.t, s.queueDepth]);
  const nodes = Object.keys(s.busy).sort();
  draw(
    "chart-busy",
    "Each node's busy share (this gateway's sessions)",
    "%",
    nodes,
    [s.t, ...nodes.map((n) => s.busy[n].map((x) => 100 * x))],
  );
}

/** For tests: what each chart shows (series labels and how many points). */
export function chartsShown() {
  return Object.fromEntries(
    [...charts].map(([id, c]) => [id, {
      series: c.plot!.series.slice(1).map((x) => String(x.label)),
      points: c.plot!.data[0].length,
    }]),
  );
}
