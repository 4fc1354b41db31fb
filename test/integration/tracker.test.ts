import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("tracker restart", () => {
  it("keeps registrations, admissions and its route key; re-learns leases; routes again", async () => {
    const r = await denoRun(`${root}test/integration/tracker.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    const admitted = (s: Array<{ admission: string }>) => s.filter((n) => n.admission === "admitted").length;
    expect(admitted(out.before)).toBe(2);
    expect(out.routeBefore.tokens).toHaveLength(2);
    // from the database, before any heartbeat: known and admitted, and live for one lease from
    // the restart (running routes and their repairs keep them while they beat again)
    expect(admitted(out.afterRestart)).toBe(2);
    expect(out.afterRestart.every((n: { live: boolean }) => n.live)).toBe(true);
    expect(out.afterHeartbeats.every((n: { live: boolean }) => n.live)).toBe(true);
    // same route, same tokens: the nodes still accept the tracker's tickets (its key survived)
    expect(out.routeAfter.name).toBe(out.routeBefore.name);
    expect(out.routeAfter.tokens).toEqual(out.routeBefore.tokens);
    expect(BigInt(out.routeAfter.epoch)).toBeGreaterThan(BigInt(out.routeBefore.epoch));
    expect(out.wrongToken).toBe("[unauthenticated] node token refused");
  });
});
