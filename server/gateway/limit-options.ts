// The client limits as command options, shared by `strata gateway` and `strata up` (which
// hands them on to its gateway).
import type { Command } from "commander";
import { type ClientLimitOptions, NO_CLIENT_LIMITS } from "../../src/gateway/client-limits.ts";
import { count } from "../cli/options.ts";

export function addClientLimitOptions(c: Command): Command {
  return c
    .option(
      "--limit-requests-per-min <n>",
      "requests a minute one client (its API key, else its address) may make; past it 429 (0: no limit)",
      count("limit-requests-per-min"),
      0,
    )
    .option(
      "--limit-concurrent <n>",
      "requests one client may have in flight at once; past it 429 (0: no limit)",
      count("limit-concurrent"),
      0,
    )
    .option(
      "--limit-tokens-per-min <n>",
      "prompt and generated tokens a minute one client may use; past it 429 (0: no limit)",
      count("limit-tokens-per-min"),
      0,
    );
}

export function clientLimitsOf(o: {
  limitRequestsPerMin?: number;
  limitConcurrent?: number;
  limitTokensPerMin?: number;
}): ClientLimitOptions {
  return {
    requestsPerMin: o.limitRequestsPerMin ?? NO_CLIENT_LIMITS.requestsPerMin,
    concurrent: o.limitConcurrent ?? NO_CLIENT_LIMITS.concurrent,
    tokensPerMin: o.limitTokensPerMin ?? NO_CLIENT_LIMITS.tokensPerMin,
  };
}

/** The options again, for a gateway process started by `strata up`. */
export function clientLimitArgs(l: ClientLimitOptions): string[] {
  return [
    "--limit-requests-per-min",
    String(l.requestsPerMin),
    "--limit-concurrent",
    String(l.concurrent),
    "--limit-tokens-per-min",
    String(l.tokensPerMin),
  ];
}
