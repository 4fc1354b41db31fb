import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("placement by the tracker (strata node --layers auto)", () => {
  it("covers every layer within the caps, serves the whole model's tokens, and moves a node into the hole a dead one left while a stream through it waits and goes on", async () => {
    const r = await denoRun(`${root}test/integration/placement.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // caps of 90 MB: no node holds all 30 layers (134 MB with these settings), two do
    expect(out.first.length, JSON.stringify(out)).toBe(3);
    expect(out.firstCovered).toBe(true);
    for (const n of out.first) expect(n.layers).not.toBe("0:30");
    expect(out.firstRoute.tokens, JSON.stringify(out.firstRoute)).toEqual(out.want);
    // the node killed mid-stream held a range no one else did: the stream's repair waited for
    // the placement to move c there (it loads the range on demand) and went on, no error, the
    // same text as with every node up
    const rep = out.repaired;
    expect(rep.done && !rep.error && rep.same, JSON.stringify(rep)).toBe(true);
    expect(rep.repairs.length, JSON.stringify(rep)).toBeGreaterThanOrEqual(1);
    expect(rep.repairs[0].nodes, JSON.stringify(rep)).toContain(out.victim.node);
    // the survivor that doubled a range now holds the dead node's
    expect(out.afterCovered, JSON.stringify(out)).toBe(true);
    expect(out.after.find((n: { node: string }) => n.node === "c").layers).toBe(out.victim.layers);
    expect(out.afterRoute.tokens, JSON.stringify(out.afterRoute)).toEqual(out.want);
  });
});
