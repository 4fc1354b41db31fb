import { describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { denoRun, root } from "./strata.ts";

// Separate hosts need network namespaces: root and iproute2. Elsewhere this says why and skips.
function whyNot(): string | undefined {
  if (process.getuid?.() !== 0) return "network namespaces need root";
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "ignore" });
  } catch {
    return "no iproute2 (apt-get install iproute2)";
  }
  return undefined;
}
const why = whyNot();
if (why) console.warn(`separate-host test skipped: ${why}`);

describe.skipIf(!!why)("one model across separate hosts (network namespaces)", () => {
  it("serves chats from hosts of their own with whole-model llama.cpp's text, at any link delay", async () => {
    const r = await denoRun(`${root}test/integration/hosts.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // five hosts, five addresses; the route's nodes are the two shard hosts
    expect(out.hosts.map((h: { name: string }) => h.name)).toEqual([
      "relay",
      "tracker",
      "gateway",
      "n0",
      "n1",
    ]);
    expect(new Set(out.hosts.map((h: { ip: string }) => h.ip)).size).toBe(5);
    expect(out.gateway).toMatch(/^http:\/\/10\.213\.0\.3:7000$/);
    for (const c of out.chats) {
      expect(c.exact || c.at?.nearTie, JSON.stringify(c)).toBe(true);
      expect(c.nodes).toEqual(["n0", "n1"]);
    }
    // measured at every delay (the contract, not this test, judges the rates)
    for (const run of out.runs) {
      console.log(
        `one-way delay ${run.delay_ms} ms: ${run.decode_tps.toFixed(1)} tok/s; budget ${
          run.budget_tps.toFixed(1)
        } (${run.vs_budget.toFixed(2)}×)`,
      );
      expect(run.tokens).toBeGreaterThan(8);
      // driver → n0 → n1, and n1's reply straight back to the gateway: hops + 1, as the gateway counted
      expect(run.crossings).toBe(3);
    }
    expect(out.runs.map((x: { delay_ms: number }) => x.delay_ms)).toEqual([0, 5, 20, 50]);
  });
});
