import { describe, expect, it } from "vitest";
import { layerRange } from "../../src/engine/layer-range.ts";
import { rangeMemory } from "../../src/engine/memory-cap.ts";
import { uniformKv } from "../../src/gguf/kv-shape.ts";
import { assignRange } from "../../src/tracker/placement/assign.ts";

const split = [layerRange(0, 10), layerRange(10, 20), layerRange(20, 30)];
const mem = (perLayer: number) => (r: { start: number; end: number }) =>
  rangeMemory({
    weightBytes: (r.end - r.start) * perLayer,
    kv: uniformKv(r.end - r.start, 192),
    kvCells: 1024,
  });

describe("a volunteer's assignment", () => {
  it("takes the range the fewest live nodes serve; dead nodes do not count", () => {
    const hosted = [
      { range: { start: 0, end: 10 }, live: true },
      { range: { start: 10, end: 20 }, live: false },
      { range: { start: 20, end: 30 }, live: true },
    ];
    const a = assignRange(split, hosted, mem(1e6), 4 * 2 ** 30);
    expect(a.ok && `${a.range.start}:${a.range.end}`).toBe("10:20");
  });

  it("never assigns a range the engine's memory cannot hold", () => {
    const uneven = [layerRange(0, 20), layerRange(20, 30)];
    // 20 layers of 250 MB do not fit 4 GiB; 10 do
    const a = assignRange(uneven, [{ range: { start: 20, end: 30 }, live: true }], mem(250e6), 4 * 2 ** 30);
    expect(a.ok && `${a.range.start}:${a.range.end}`).toBe("20:30");
    const none = assignRange(uneven, [], mem(500e6), 4 * 2 ** 30);
    expect(none.ok).toBe(false);
    expect(!none.ok && none.why).toMatch(
      /no range fits this engine: layers 0:20 need .* more than the memory cap of 4.00 GiB/,
    );
  });
});
