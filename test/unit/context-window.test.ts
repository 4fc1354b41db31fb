import { describe, expect, it } from "vitest";
import { contextCap, contextWindow, offeredContext } from "../../src/route/context-window.ts";

describe("the context a route offers", () => {
  it("is the model's trained context where the pools hold more, capped at 131,072", () => {
    expect(contextCap(8192, 65_536)).toBe(8192);
    expect(contextCap(1_000_000, Infinity)).toBe(131_072);
    expect(contextCap(8192, 3000)).toBe(3000);
  });

  it("takes, layer by layer, the node offering the most, and the least of those over the layers", () => {
    const shards = [
      { start: 0, end: 12, sessionCells: 65_536 },
      { start: 0, end: 12, sessionCells: 2048 },
      { start: 12, end: 30, sessionCells: 4096 },
      { start: 20, end: 30, sessionCells: 65_536 },
    ];
    expect(offeredContext(shards, 30, 8192)).toBe(4096);
    expect(offeredContext([...shards, { start: 12, end: 20, sessionCells: 65_536 }], 30, 8192)).toBe(8192);
    // a layer nobody holds: no route
    expect(offeredContext(shards.slice(0, 2), 30, 8192)).toBe(0);
  });

  it("needs ranges that meet: every layer covered by overlapping ranges is no route", () => {
    const overlapping = [
      { start: 0, end: 13, sessionCells: 1024 },
      { start: 13, end: 19, sessionCells: 1024 },
      { start: 15, end: 22, sessionCells: 1024 },
    ];
    expect(offeredContext(overlapping, 22, 8192)).toBe(0);
    expect(offeredContext([...overlapping, { start: 19, end: 22, sessionCells: 512 }], 22, 8192)).toBe(512);
  });

  it("refuses a prompt and max_tokens past the cap, naming it", () => {
    expect(contextWindow(6000, 32, 8192)).toEqual({ newTokens: 32, kvCells: 6032 });
    expect(contextWindow(6000, undefined, 8192)).toEqual({ newTokens: 2192, kvCells: 8192 });
    expect(contextWindow(8190, 32, 8192)).toEqual({
      refused: "this model's context is 8192 tokens here; the prompt has 8190 and max_tokens asks 32",
    });
  });
});
