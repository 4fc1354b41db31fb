// One session's decode on the whole model and on routes of its layers, in turns. The machine
// drifts between lanes measured minutes apart (the whole model's own p50 step moved by a quarter
// from one run to the next here), so each ratio against the whole model is taken round by round,
// both sides measured moments apart, and a run reports the median over its rounds.
import { formatRange, type LayerRange } from "../../src/engine/layer-range.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { type LocalRoute, startLocalRoute } from "../hosts/local-route.ts";
import { decodeTps } from "./figures.ts";
import { spawnWhole, wholeSession } from "./measure-engine.ts";
import { routeSession } from "./measure-route.ts";
import { prompt, quantile } from "./route-throughput.ts";

export interface TurnsOptions {
  readonly modelPath: string;
  readonly nLayer: number;
  readonly backend: NativeBackend;
  readonly threads: number;
  readonly promptTokens: number;
  readonly decodeTokens: number;
  /** each route's layer ranges */
  readonly splits: readonly (readonly LayerRange[])[];
  readonly rounds: number;
}

export interface TurnsRound {
  /** the lane that went first this round: 0 the whole model, i + 1 route i */
  readonly first: number;
  readonly whole_tps: number;
  readonly routes_tps: number[];
}

export interface DecodeTurns {
  /** each route's layer ranges, as "0:12,12:30" */
  readonly routes: string[];
  readonly rounds: TurnsRound[];
  /** every lane decoded the whole model's greedy tokens in every round (exact split parity) */
  readonly same_tokens: boolean;
  /** per route: its decode tok/s over the whole model's, each round */
  readonly ratios_by_round: number[][];
  /** per route: the median of its rounds' ratios */
  readonly ratios: number[];
}

/** One session's decode on a lane: its greedy tokens and each step's time. */
interface Lane {
  readonly tokens: number[];
  readonly stepMs: number[];
}

export async function decodeTurns(o: TurnsOptions): Promise<DecodeTurns> {
  const whole = await spawnWhole(o);
  const routes: LocalRoute[] = [];
  try {
    for (const split of o.splits) {
      routes.push(
        await startLocalRoute({
          modelPath: o.modelPath,
          split,
          nLayer: o.nLayer,
          backend: o.backend,
          threads: o.threads,
          transport: "direct",
        }),
      );
    }
    const p = prompt(o.promptTokens, 0);
    const lanes: ((steps: number) => Promise<Lane>)[] = [
      (steps) => wholeSession(whole, p, steps),
      ...routes.map((local, i) => async (steps: number) => {
        const { first, replies } = await routeSession(local, `turns-${i}-${crypto.randomUUID()}`, p, steps);
        return { tokens: [first.token, ...replies.map((x) => x.token)], stepMs: replies.map((x) => x.ms) };
      }),
    ];
    // warm-up as long as a turn: first-use allocations, and the seams' JIT tiers
    for (const lane of lanes) await lane(o.decodeTokens);
    const rounds: TurnsRound[] = [];
    let sameTokens = true;
    for (let r = 0; r < o.rounds; r++) {
      // each lane goes first in turn, so that no lane always follows the same one
      const first = r % lanes.length;
      const runs: Lane[] = [];
      for (let k = 0; k < lanes.length; k++) {
        const i = (first + k) % lanes.length;
        runs[i] = await lanes[i](o.decodeTokens);
      }
      const want = runs[0].tokens.join();
      if (runs.some((x) => x.tokens.join() !== want)) sameTokens = false;
      const rates = runs.map((x) => decodeTps(x.stepMs));
      rounds.push({ first, whole_tps: rates[0], routes_tps: rates.slice(1) });
    }
    const ratiosByRound = o.splits.map((_, i) => rounds.map((r) => r.routes_tps[i] / r.whole_tps));
    return {
      routes: o.splits.map((split) => split.map(formatRange).join(",")),
      rounds,
      same_tokens: sameTokens,
      ratios_by_round: ratiosByRound,
      ratios: ratiosByRound.map((xs) => quantile(xs, 0.5)),
    };
  } finally {
    await Promise.all(routes.map((r) => r.close()));
    await whole.close();
  }
}
