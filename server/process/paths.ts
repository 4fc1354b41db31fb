// Where Strata keeps what it builds and fetches: outside the repository.
import { createHash } from "node:crypto";
import { join } from "node:path";

export const repoRoot: string = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/** A short name for this checkout: CMake keeps the source folder a build folder was configured
 *  with, so two checkouts on one machine build in folders of their own (ccache shares the work). */
export const checkoutTag: string = createHash("sha256").update(repoRoot).digest("hex").slice(0, 8);

export function cacheDir(...parts: string[]): string {
  const base = Deno.env.get("STRATA_CACHE") ?? join(Deno.env.get("HOME") ?? "/tmp", ".cache", "strata");
  return join(base, ...parts);
}

/** Where engine builds and toolchains go: STRATA_BUILDS, else the cache. Apart from what a host
 *  holds of models (the cache), so hosts of one machine can share the software and nothing else. */
export function buildDir(...parts: string[]): string {
  const base = Deno.env.get("STRATA_BUILDS");
  return base ? join(base, ...parts) : cacheDir(...parts);
}
