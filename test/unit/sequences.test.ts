import { describe, expect, it } from "vitest";
import { layerRange } from "../../src/engine/layer-range.ts";
import type { ModelFacts } from "../../src/engine/range-engine.ts";
import { SequenceTable } from "../../src/engine/sequences.ts";

const facts: ModelFacts = {
  arch: "llama",
  nLayer: 6,
  seamWidth: 4,
  nVocab: 10,
  nCtxTrain: 64,
  nHead: 2,
  nHeadKv: 1,
  nExpert: 0,
  range: layerRange(3, 6),
  weightBytes: 0,
};
const code = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return (e as { code?: string }).code;
  }
  return "ok";
};

describe("sequence table", () => {
  it("hands out slots until the budget is spent, and reuses released ones", () => {
    const t = new SequenceTable(2);
    const a = t.open();
    t.open();
    expect(code(() => t.open())).toBe("kv_full");
    t.release(a);
    expect(t.open()).toBe(a);
  });

  it("refuses malformed batches with a code per cause", () => {
    const t = new SequenceTable(2);
    const s = t.open();
    const hidden = (n: number) => new Float32Array(n);
    const one = (extra: object) => ({ seq: Int32Array.of(s), pos: Int32Array.of(0), ...extra });
    expect(code(() => t.check(one({ hidden: hidden(4) }), facts, "hidden", 8))).toBe("ok");
    expect(code(() => t.check(one({ hidden: hidden(5) }), facts, "hidden", 8))).toBe("bad_input");
    expect(code(() => t.check(one({ tokens: Int32Array.of(1) }), facts, "hidden", 8))).toBe("bad_input");
    expect(code(() => t.check(one({ tokens: Int32Array.of(10) }), facts, "tokens", 8))).toBe("bad_input");
    expect(code(() => t.check({ ...one({ hidden: hidden(4) }), seq: Int32Array.of(1) }, facts, "hidden", 8)))
      .toBe("unknown_sequence");
    expect(code(() => t.check({ ...one({ hidden: hidden(4) }), pos: Int32Array.of(3) }, facts, "hidden", 8)))
      .toBe("bad_position");
    expect(
      code(() =>
        t.check({ seq: new Int32Array(9), pos: new Int32Array(9), hidden: hidden(36) }, facts, "hidden", 8)
      ),
    )
      .toBe("bad_input");
  });

  it("tracks positions per sequence across batches that mix sequences", () => {
    const t = new SequenceTable(2);
    const a = t.open();
    const b = t.open();
    const batch = {
      tokens: Int32Array.of(1, 2, 3),
      seq: Int32Array.of(a, a, b),
      pos: Int32Array.of(0, 1, 0),
    };
    t.check(batch, facts, "tokens", 8);
    t.commit(batch);
    expect([t.nextPosition(a), t.nextPosition(b)]).toEqual([2, 1]);
    expect(
      code(() =>
        t.check(
          { tokens: Int32Array.of(1), seq: Int32Array.of(a), pos: Int32Array.of(1) },
          facts,
          "tokens",
          8,
        )
      ),
    )
      .toBe("bad_position");
  });
});
