import { describe, expect, it } from "vitest";
import { evenSplit, LayerRangeError, parseLayerRange, parseSplit } from "../../src/engine/layer-range.ts";

describe("layer ranges", () => {
  it("parses a:b and refuses empty, reversed or too long ranges", () => {
    expect(parseLayerRange("3:7", 30)).toEqual({ start: 3, end: 7 });
    expect(() => parseLayerRange("7:7")).toThrow(LayerRangeError);
    expect(() => parseLayerRange("9:2")).toThrow(/reversed/);
    expect(() => parseLayerRange("0:31", 30)).toThrow(/past the model's 30 layers/);
    expect(() => parseLayerRange("0-4")).toThrow(/a:b/);
  });

  it("accepts only splits that cover [0, n) contiguously", () => {
    expect(parseSplit("0:12,12:30", 30).map((r) => [r.start, r.end])).toEqual([[0, 12], [12, 30]]);
    expect(() => parseSplit("0:12,13:30", 30)).toThrow(/contiguous/);
    expect(() => parseSplit("0:12,12:29", 30)).toThrow(/stops at layer 29/);
    expect(() => parseSplit("1:30", 30)).toThrow(/starting at 0/);
  });

  it("splits evenly", () => {
    expect(evenSplit(30, 3).map((r) => [r.start, r.end])).toEqual([[0, 10], [10, 20], [20, 30]]);
    expect(() => evenSplit(2, 3)).toThrow(LayerRangeError);
  });
});
