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
