import { existsSync, readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

// `./strata test` installs the server (as root); elsewhere the test says why it skips
const postgres = existsSync("/usr/lib/postgresql") && readdirSync("/usr/lib/postgresql").length > 0;
if (!postgres) console.warn("skipping replica pulls: no PostgreSQL server (apt-get install postgresql)");

describe.skipIf(!postgres)("a tracker replica's pulls from PostgreSQL", () => {
  it("reads each other replica's write once, not its own beats, and a write that commits late", async () => {
    const r = await denoRun(`${root}test/integration/pg-pull.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(out.firstOnB).toEqual(["n1", "n2"]);
    expect(out.firstOnA).toEqual(["n1", "n2"]);
    expect(out.nextOnA).toEqual([]);
    expect(out.nextOnB).toEqual(["n3"]);
    // "early" committed first: read; "late" was written first but not yet committed
    expect(out.whileOpen).toEqual(["early"]);
    // read now; "early" again too: it came after the oldest transaction under way at that
    // pull (what is read twice is what was written while a slower transaction was open)
    expect(out.afterCommit).toEqual(["early", "late"]);
    expect(out.quiet).toEqual([]);
  });
});
