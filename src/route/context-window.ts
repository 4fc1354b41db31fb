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
 * The longest context a route can offer now: on every layer the node that offers the most,
 * the least of those over the layers, capped as contextCap caps it. 0 while some layer has no
 * node (no complete route).
 */
export function offeredContext(shards: readonly OfferedShard[], nLayer: number, nCtxTrain: number): number {
  let cells = Infinity;
  for (let layer = 0; layer < nLayer; layer++) {
    let best = 0;
    for (const s of shards) if (s.start <= layer && layer < s.end) best = Math.max(best, s.sessionCells);
    cells = Math.min(cells, best);
  }
  return cells > 0 ? contextCap(nCtxTrain, cells) : 0;
}
