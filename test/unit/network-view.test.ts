import { describe, expect, it } from "vitest";
import { ActiveRoutes } from "../../src/gateway/active-routes.ts";
import { changes, coverage, type NodeView, runs } from "../../src/gateway/network-view.ts";

const node = (name: string, start: number, end: number, o: Partial<NodeView> = {}): NodeView => ({
  node: name,
  start,
  end,
  engine: "native-cpu",
  live: true,
  admission: "admitted",
  capBytes: 0,
  needBytes: 0,
  tokensPerS: 0,
  sessions: 0,
  ...o,
});

describe("network view", () => {
  it("counts live, admitted hosts per layer: gaps, thin spots, runs", () => {
    const nodes = [
      node("a", 0, 4),
      node("b", 2, 6),
      node("dead", 6, 8, { live: false }),
      node("liar", 6, 8, { admission: "refused: spot check: …" }),
    ];
    const hosts = coverage(8, nodes);
    expect(hosts).toEqual([1, 1, 2, 2, 1, 1, 0, 0]);
    expect(runs(hosts)).toEqual([
      { start: 0, end: 2, hosts: 1 },
      { start: 2, end: 4, hosts: 2 },
      { start: 4, end: 6, hosts: 1 },
      { start: 6, end: 8, hosts: 0 },
    ]);
  });

  it("says who joined, moved and left between two looks", () => {
    const before = [node("a", 0, 4), node("b", 4, 8), node("c", 0, 4)];
    const after = [node("a", 0, 4), node("c", 4, 8), node("d", 0, 2), node("b", 4, 8, { live: false })];
    expect(changes(before, after)).toEqual([
      { kind: "moved", node: "c", from: "0:4", to: "4:8" },
      { kind: "joined", node: "d", layers: "0:2" },
      { kind: "left", node: "b", layers: "4:8" },
    ]);
  });

  it("counts the gateway's sessions by route, each ended once", () => {
    const r = new ActiveRoutes();
    const a1 = r.open("a+b");
    const a2 = r.open("a+b");
    r.open("c+d");
    a1();
    a1();
    expect(r.snapshot()).toEqual([{ name: "a+b", sessions: 1 }, { name: "c+d", sessions: 1 }]);
    a2();
    expect(r.snapshot()).toEqual([{ name: "c+d", sessions: 1 }]);
  });
});
