import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

/** What every chaos run must show: no client saw an error, nothing changed, nothing leaked. */
// deno-lint-ignore no-explicit-any
function expectRepaired(r: any, kills: number) {
  const detail = JSON.stringify(r);
  expect(r.kills.length, detail).toBe(kills);
  // each kill hit sessions, and every one of them went on through another route
  for (const k of r.kills) expect(k.sessions, detail).toBeGreaterThan(0);
  expect(r.errors, detail).toBe(0);
  // greedy and seeded chats alike equal the same chats answered with every node up: the
  // nodes run batch-invariant kernels and the draw is seeded by position
  expect(r.wrong_tokens, detail).toBe(0);
  for (const c of r.chats) expect((c.same || c.nearTie) && c.done && !c.error, detail).toBe(true);
  expect(r.repairs, detail).toBeGreaterThanOrEqual(kills);
  expect(r.recover_ms_p50, detail).toBeGreaterThan(0);
  expect(r.replayed_positions_mean, detail).toBeGreaterThan(0);
  // the nodes still there kept the session: repairs rebuilt only the lost hop (a repair
  // before the first token, or one the parking outlasted, re-prefills the whole route)
  expect(r.repairs_lost_hop, detail).toBeGreaterThan(0);
  // every node still up ends with no sessions and (where it can be asked directly) no KV
  expect(r.sessions_left, detail).toEqual([]);
  for (const n of r.kv_cells_used) expect(n.kvCellsUsed, detail).toBe(0);
}

describe("routes repair themselves", () => {
  it("a node killed mid-generation is invisible to the user: streams go on, exactly as without the failure", async () => {
    const r = await denoRun(`${root}test/integration/chaos.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expectRepaired(out.kills, 4);
    // native nodes only: every chat exactly as without the failures
    expect(out.kills.near_ties).toBe(0);
    // the tracker was killed halfway and came back; no request failed because of it
    expect(out.kills.tracker_back_ms).toBeGreaterThan(0);
    // the gateway killed under 4 streams: started again, it serves; its sessions ended on
    // every node and nothing holds KV
    const g = out.kills.gateway_restart;
    expect(g.back_ms, JSON.stringify(g)).toBeGreaterThan(0);
    expect(g.sessions_freed_ms, JSON.stringify(g)).toBeGreaterThanOrEqual(0);
    expect(g.kv_cells_used.every((n: number) => n === 0), JSON.stringify(g)).toBe(true);
    expect(g.serves_after, JSON.stringify(g)).toBe(true);
    // a first node, a last node, a relay-only node
    expect(out.kills.kills.slice(0, 3).map((k: { kind: string }) => k.kind)).toEqual([
      "first",
      "last",
      "relay",
    ]);
    expect(out.kills.kills[0].range).toBe("0:12");
    expect(out.kills.kills[1].range).toBe("12:30");
    expect(out.kills.kills[2].relayOnly).toBe(true);
    if (out.tab === null) {
      console.warn("chaos with a tab skipped: needs Chromium");
      return;
    }
    expectRepaired(out.tab, 1);
    expect(out.tab.kills[0].kind).toBe("tab");
  });
});
