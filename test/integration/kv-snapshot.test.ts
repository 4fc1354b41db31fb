import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("repair from a KV snapshot (strata up, two routes, the gateway mirroring prompts' KV)", () => {
  it("the lost node's standby joins from its snapshot, is rebuilt only past it, and the answer is whole-model llama.cpp's", async () => {
    const r = await denoRun(`${root}test/integration/kv-snapshot.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    const a = out.answer;
    expect([a.status, a.error], JSON.stringify(a)).toEqual([200, undefined]);
    // both shards of the route sent their prompt KV to the other route's node of their range
    expect(out.sent).toHaveLength(2);
    expect(out.mirrored).toHaveLength(2);
    // one repair, through the standby that held the snapshot of the lost node's range
    expect(a.repairs, JSON.stringify(a.repairs)).toHaveLength(1);
    const repair = a.repairs[0];
    expect(repair.nodes).toEqual([a.victim]);
    expect(repair.kind).toBe("lost_hop");
    expect(repair.hops_rebuilt).toBe(1);
    expect(repair.snapshot_positions).toBeGreaterThanOrEqual(256);
    expect(repair.snapshot_positions % 64).toBe(0);
    // rebuilt past the snapshot only: what is left of the prompt's last block, and the tokens so far
    expect(repair.replayed_positions).toBeLessThan(64 + 160);
    expect(repair.layer_positions_rebuilt).toBe(repair.replayed_positions * repair.layers_rebuilt);
    // /metrics: the positions the repair took from the snapshot, the standbys' snapshots, budgets
    const metric = (re: RegExp) =>
      out.metrics.filter((l: string) => re.test(l)).map((l: string) => Number(l.split(" ")[1]));
    expect(metric(/^strata_repair_snapshot_positions_total /)).toEqual([repair.snapshot_positions]);
    for (const m of out.mirrored) {
      expect(metric(new RegExp(`^strata_node_snapshots_taken_total\\{node="${m.node}"\\}`))).toEqual([1]);
      expect(metric(new RegExp(`^strata_node_prefix_budget_cells\\{node="${m.node}"\\}`))[0]).toBeGreaterThan(
        0,
      );
    }
    // a node that stops hands its prefix entry (the finished chat's) to the other node of its range
    expect(out.handover.after, JSON.stringify(out.handover)).toBe(out.handover.before + 1);
    // and the answer goes on as whole-model llama.cpp's greedy text (or leaves it only at a near-tie)
    if (a.text !== out.reference) expect(out.at?.nearTie, JSON.stringify(out.at)).toBe(true);
  });
});
