// Where Strata keeps what it builds and fetches: outside the repository.
import { join } from "node:path";

export const repoRoot: string = new URL("../", import.meta.url).pathname.replace(/\/$/, "");

export function cacheDir(...parts: string[]): string {
  const base = Deno.env.get("STRATA_CACHE") ?? join(Deno.env.get("HOME") ?? "/tmp", ".cache", "strata");
  return join(base, ...parts);
}
