// Inputs kept from earlier finds, one file each under regressions/<target>/: every fuzz run
// and the suite feed them first.
import { existsSync, readdirSync, readFileSync } from "node:fs";

const DIR = new URL("./regressions/", import.meta.url);

export function regressionsOf(target: string): Uint8Array[] {
  const dir = new URL(`${target}/`, DIR);
  if (!existsSync(dir)) return [];
  return readdirSync(dir).sort().map((f) => new Uint8Array(readFileSync(new URL(f, dir))));
}
