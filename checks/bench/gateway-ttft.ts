// TTFT through `strata up`'s gateway against the route's own: the same chat prompts, a request
// to the gateway and a prefill on a route of the same split, in turns. The nodes of both are
// held to cpu0 and cpu1, the gateway and this driver to cpu1. What the gateway adds is its
// HTTP, admission, tokenizing, the tracker's route and the route's opening.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import type { Tokenizer } from "../../src/engine/tokenizer.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { up } from "../../server/up/up.ts";
import { startLocalRoute } from "../hosts/local-route.ts";
import { PARITY_QUESTIONS } from "../parity/prompts.ts";
import { routeSession } from "./measure-route.ts";
import { coresOf, pin } from "./pin.ts";
import { quantile } from "./route-throughput.ts";
import { timedChat } from "./timed-chat.ts";

export interface GatewayTtftOptions {
  readonly model: string;
  readonly modelPath: string;
  readonly nLayer: number;
  readonly split: readonly LayerRange[];
  readonly backend: NativeBackend;
  readonly tokenizer: Tokenizer;
  /** rounds over the questions */
  readonly rounds: number;
}

export async function gatewayTtft(o: GatewayTtftOptions) {
  const cores = await coresOf(Deno.pid);
  await pin(Deno.pid, 1);
  const dir = await Deno.makeTempDir({ prefix: "strata-gateway-ttft-" });
  const net = await up({
    model: o.model,
    split: [...o.split],
    routes: 1,
    backend: o.backend,
    threads: 1,
    gatewayListen: "127.0.0.1:0",
    apiKeys: [],
    leaseMs: 5000,
    dbPath: `${dir}/tracker.db`,
    // every prompt prefilled whole, as the route's own is
    prefixReuse: false,
  });
  const local = await startLocalRoute({
    modelPath: o.modelPath,
    split: o.split,
    nLayer: o.nLayer,
    backend: o.backend,
    threads: 1,
    transport: "direct",
  });
  try {
    await Promise.all([
      ...net.nodes.map((n, i) => pin(n.process.child.pid, i % 2)),
      ...local.nodes.map((n, i) => pin(n.child.pid, i % 2)),
      pin(net.pid("gateway"), 1),
    ]);
    const prompts = PARITY_QUESTIONS.map((q) =>
      o.tokenizer.tokenize(o.tokenizer.applyChat([{ role: "user", content: q }]), {
        addSpecial: true,
        parseSpecial: true,
      })
    );
    const gateway = async (i: number) => (await timedChat(net.gateway, PARITY_QUESTIONS[i], 2)).ttftMs;
    const own = async (i: number) =>
      (await routeSession(local, `ttft-${crypto.randomUUID()}`, prompts[i], 0)).ttft;
    // warm-up: each side once
    await gateway(0);
    await own(0);
    const runs: { prompt_tokens: number; gateway_ms: number; route_ms: number }[] = [];
    for (let r = 0; r < o.rounds; r++) {
      for (let i = 0; i < prompts.length; i++) {
        // the side going first alternates
        const first = (r + i) % 2 === 0;
        const a = first ? await gateway(i) : await own(i);
        const b = first ? await own(i) : await gateway(i);
        runs.push({ prompt_tokens: prompts[i].length, gateway_ms: first ? a : b, route_ms: first ? b : a });
      }
    }
    const gw = quantile(runs.map((x) => x.gateway_ms), 0.5);
    const route = quantile(runs.map((x) => x.route_ms), 0.5);
    const budget = 1.1 * route + 5;
    return {
      split: o.split.map((s) => `${s.start}:${s.end}`).join(","),
      runs,
      ttft_ms_p50: gw,
      route_ttft_ms_p50: route,
      ttft_budget_ms: budget,
      ttft_vs_route_budget: gw / budget,
    };
  } finally {
    await local.close();
    await net.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await pin(Deno.pid, cores);
  }
}
