import { describe, expect, it } from "vitest";
import { statusText } from "../../src/gateway/status-text.ts";
import type { NodeView } from "../../src/gateway/network-view.ts";

const node = (o: Partial<NodeView>): NodeView => ({
  node: "n",
  start: 0,
  end: 10,
  engine: "native-cpu",
  live: true,
  admission: "admitted",
  capBytes: 0,
  needBytes: 300 * 2 ** 20,
  tokensPerS: 250,
  sessions: 0,
  ...o,
});

describe("strata status", () => {
  it("says what serves, the coverage with its gaps, each node and the routes in use", () => {
    const text = statusText(
      {
        model: { name: "m", nLayer: 30, artifact: "ab".repeat(32) },
        nodes: [
          node({ node: "b", start: 10, end: 20, capBytes: 2 ** 31, sessions: 1, engine: "wasm-cpu" }),
          node({ node: "a" }),
          node({ node: "c", start: 10, end: 20, live: false }),
        ],
        routes: [{ name: "a+b", sessions: 1 }, { name: "idle", sessions: 0 }],
        at: 0,
      },
      { ok: false, reason: "no complete route of admitted, live nodes" },
    );
    expect(text.split("\n")).toEqual([
      "model m: 30 layers, artifact abababababab…",
      "not serving: no complete route of admitted, live nodes",
      "coverage: 0:20 ×1, 20:30 ×0 (gaps: 20:30)",
      "nodes (3):",
      "  a     0:10    native-cpu   admitted  300 MiB, no cap  250 tok/s  0 sessions",
      "  b     10:20   wasm-cpu     admitted  300 MiB of 2.0 GiB cap  250 tok/s  1 session",
      "  c     10:20   native-cpu   admitted (gone)  300 MiB, no cap  250 tok/s  0 sessions",
      "routes in use: a+b (1 session)",
    ]);
  });
});
