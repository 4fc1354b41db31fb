// Structured logs: one JSON object per line on stderr. Quiet by default (warnings and
// errors only); STRATA_LOG=info or debug shows more.
import process from "node:process";

const LEVELS = { error: 0, warn: 1, info: 2, debug: 3 } as const;
type Level = keyof typeof LEVELS;

// node:process reads the same under Deno and Node (which runs the seam code too)
const threshold: number = LEVELS[(process.env.STRATA_LOG ?? "warn") as Level] ?? LEVELS.warn;

function emit(level: Level, event: string, fields: Record<string, unknown>): void {
  if (LEVELS[level] > threshold) return;
  const line = JSON.stringify({ t: new Date().toISOString(), level, event, ...fields });
  console.error(line);
}

export const log = {
  error: (event: string, fields: Record<string, unknown> = {}) => emit("error", event, fields),
  warn: (event: string, fields: Record<string, unknown> = {}) => emit("warn", event, fields),
  info: (event: string, fields: Record<string, unknown> = {}) => emit("info", event, fields),
  debug: (event: string, fields: Record<string, unknown> = {}) => emit("debug", event, fields),
  enabled: (level: Level) => LEVELS[level] <= threshold,
};

/** A relay connection dropping and coming back (Dialer.connect's `onRelay`). */
export const logRelay = (state: "down" | "up", detail: string): void =>
  log[state === "up" ? "info" : "warn"]("relay connection", { state, detail });
