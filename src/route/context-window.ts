// How many tokens one session may hold along a route, decided once for every caller (the
// gateway, static routes from the CLI, parity runs): the KV cells its OPEN claims.

/** No session uses more than this, whatever the model and the route would allow. */
export const MAX_CONTEXT_TOKENS = 131_072;

/** The longest context a session may use: the model's trained one, the ceiling, the route's per-session KV. */
export function contextCap(nCtxTrain: number, routeSessionCells = Infinity): number {
  return Math.min(nCtxTrain || Infinity, MAX_CONTEXT_TOKENS, routeSessionCells);
}

export interface ContextWindow {
  /** new tokens the session may generate */
  readonly newTokens: number;
  /** KV cells it claims on every node: prompt plus new tokens */
  readonly kvCells: number;
}

/** A prompt and the new tokens asked (all the room left when undefined) → the session's window, or why not. */
export function contextWindow(
  promptTokens: number,
  newTokens: number | undefined,
  cap: number,
): ContextWindow | { readonly refused: string } {
  const n = newTokens ?? cap - promptTokens;
  if (promptTokens + n > cap || n < 1) {
    return {
      refused:
        `this model's context is ${cap} tokens here; the prompt has ${promptTokens} and max_tokens asks ${n}`,
    };
  }
  return { newTokens: n, kvCells: promptTokens + n };
}

/** What a live, admitted node advertises of its range and the context it gives a session. */
export interface OfferedShard {
  readonly start: number;
  readonly end: number;
  readonly sessionCells: number;
}

/**
 * The longest context a route can offer now: over the chains of ranges from layer 0 to the
 * last, each hop starting where the one before ended (the routes a tracker hands out), the one
 * whose tightest node offers the most, capped as contextCap caps it. 0 without such a chain
 * (a layer nobody holds, or ranges that cover every layer but overlap without meeting).
 */
export function offeredContext(shards: readonly OfferedShard[], nLayer: number, nCtxTrain: number): number {
  // reach[l]: the most cells a chain from layer 0 up to l offers (0: none reaches l)
  const reach = new Array<number>(nLayer + 1).fill(0);
  reach[0] = Infinity;
  const byStart = [...shards].filter((s) => s.start >= 0 && s.end <= nLayer && s.start < s.end)
    .sort((a, b) => a.start - b.start);
  for (const s of byStart) {
    if (reach[s.start] > 0) reach[s.end] = Math.max(reach[s.end], Math.min(reach[s.start], s.sessionCells));
  }
  const cells = reach[nLayer];
  return cells > 0 ? contextCap(nCtxTrain, cells) : 0;
}
