// Prefix entries in a shard's batcher: a finished session's KV kept under its blocks, taken over
// by a session whose blocks extend them (cut back to what they share), evicted least recently
// used within the budget and before any live session gives way. The fake engine's sequence
// table checks every position, so a step at the wrong place after a reuse fails.
import { describe, expect, it, vi } from "vitest";
import { Batcher, type BatcherLimits, type Step } from "../../src/scheduler/batcher.ts";
import type { PrefixKey } from "../../src/scheduler/prefix-entries.ts";
import { FakeEngine, hiddenRows } from "../fakes/fake-engine.ts";

vi.setConfig({ testTimeout: 5_000 });

const B = 4;
const limits = (o: Partial<BatcherLimits> = {}): BatcherLimits => ({
  maxBatchTokens: 64,
  maxQueuedPerSession: 8,
  kvCells: 256,
  prefix: { entries: 4, cells: 128 },
  ...o,
});
const shard = (o: ConstructorParameters<typeof FakeEngine>[0] = {}) =>
  new FakeEngine({ range: { start: 0, end: 2 }, nLayer: 4, ...o });
const tokens = (...ids: number[]): Step => ({ tokens: Int32Array.from(ids), wantLogits: false });
const run = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);
/** blocks named by letters: "abc" is three blocks */
const key = (blocks: string, lineage = "l0"): PrefixKey => ({ lineage, blocks: [...blocks], blockTokens: B });

describe("prefix entries in the batcher", () => {
  it("a session whose blocks extend a kept one starts where they part, and computes only the rest", async () => {
    const e = shard();
    const b = new Batcher(e, limits());
    b.open("turn1", 64);
    await b.submit("turn1", tokens(...run(10)));
    await b.keep("turn1", key("ab")); // 10 positions: two whole blocks kept, the rest let go
    expect(b.stats().prefix).toMatchObject({ entries: 1, cells: 8, hits: 0 });
    expect(b.stats().reservedCells).toBe(8);

    // the next turn shares both blocks and goes on, on a copy: the entry stays for the next
    expect(b.open("turn2", 64, { prefix: key("abcd") })).toBe(8);
    const r = await b.submit("turn2", tokens(20, 21, 22));
    expect(r.data).toEqual(hiddenRows([20, 21, 22], 8, 2));
    expect(e.calls.at(-1)!.pos).toEqual([8, 9, 10]);
    expect(e.copies).toEqual([{ src: 0, dst: 1, pos: 8 }]);
    expect(b.stats().prefix).toMatchObject({ entries: 1, hits: 1, tokensReused: 8 });
    expect(b.stats().reservedCells).toBe(8 + 11);
    // another user with the same system prompt, at the same time
    expect(b.open("other", 64, { prefix: key("abzz") })).toBe(8);
    await b.submit("other", tokens(30));
    expect(e.calls.at(-1)!.pos).toEqual([8]);
  });

  it("with no sequence free the entry itself moves to the session", async () => {
    const e = shard({ maxSequences: 2 });
    const b = new Batcher(e, limits());
    b.open("s", 64);
    await b.submit("s", tokens(...run(8)));
    await b.keep("s", key("ab"));
    b.open("live", 64);
    expect(b.open("t", 64, { prefix: key("ab") })).toBe(8);
    await b.submit("t", tokens(3));
    expect(e.calls.at(-1)!.pos).toEqual([8]);
    expect(e.copies).toEqual([]);
    expect(b.stats().prefix).toMatchObject({ entries: 0, hits: 1 });
  });

  it("shares only the blocks both hold, and nothing across lineages", async () => {
    const e = shard();
    const b = new Batcher(e, limits());
    b.open("s", 64);
    await b.submit("s", tokens(...run(12)));
    await b.keep("s", key("abc"));
    expect(b.open("other-shards", 64, { prefix: key("abc", "l1") })).toBe(0);
    expect(b.open("parted", 64, { prefix: key("abx") })).toBe(8);
    await b.submit("parted", tokens(30));
    expect(e.calls.at(-1)!.pos).toEqual([8]);
    expect(b.stats().prefix).toMatchObject({ hits: 1, misses: 1, entries: 1 });
  });

  it("the route goes on from fewer positions: cutBack before the first step", async () => {
    const e = shard();
    const b = new Batcher(e, limits());
    b.open("s", 64);
    await b.submit("s", tokens(...run(12)));
    await b.keep("s", key("abc"));
    expect(b.open("t", 64, { prefix: key("abc") })).toBe(12);
    // another shard of the route held only one block
    expect(b.cutBack("t", 4)).toBe(4);
    await b.submit("t", tokens(7, 8));
    expect(e.calls.at(-1)!.pos).toEqual([4, 5]);
    expect(b.stats().reservedCells).toBe(12 + 6);
  });

  it("keeps at most its budget, letting the least recently kept go", async () => {
    const e = shard();
    const b = new Batcher(e, limits({ prefix: { entries: 2, cells: 128 } }));
    for (const id of ["a", "b", "c"]) {
      b.open(id, 64);
      await b.submit(id, tokens(...run(4)));
      await b.keep(id, key(id));
    }
    expect(b.stats().prefix).toMatchObject({ entries: 2, evictions: 1 });
    expect(b.open("wants-a", 64, { prefix: key("a") })).toBe(0);
    expect(b.open("wants-c", 64, { prefix: key("c") })).toBe(4);
  });

  it("an entry gives way before any live session: the pool and the slots", async () => {
    // the pool: 32 cells, an entry of 24; a live session's 20 cells take it
    const e = shard({ kvCells: 32, maxSequences: 2 });
    const b = new Batcher(e, limits({ kvCells: 32 }));
    b.open("old", 32);
    await b.submit("old", tokens(...run(24)));
    await b.keep("old", key("abcdef"));
    b.open("live", 32);
    await b.submit("live", tokens(...run(20)));
    expect(b.stats().prefix).toMatchObject({ entries: 0, evictions: 1 });
    expect(b.stats().reservedCells).toBe(20);

    // the slots: both sequences held by entries, a new session takes the oldest one's, empty
    const f = shard({ maxSequences: 2 });
    const c = new Batcher(f, limits());
    for (const id of ["x", "y"]) {
      c.open(id, 64);
      await c.submit(id, tokens(...run(8)));
      await c.keep(id, key(id + id));
    }
    expect(c.open("z", 64)).toBe(0);
    await c.submit("z", tokens(1, 2, 3));
    expect(f.calls.at(-1)!.pos).toEqual([0, 1, 2]);
    expect(c.stats().prefix).toMatchObject({ entries: 1, evictions: 1 });
    expect(c.stats().reservedCells).toBe(8 + 3);
  });

  it("without a budget, or with nothing whole to key, a kept session is freed", async () => {
    const e = shard();
    const b = new Batcher(e, limits({ prefix: undefined }));
    b.open("s", 64);
    await b.submit("s", tokens(...run(8)));
    await b.keep("s", key("ab"));
    expect(b.stats().prefix).toBeUndefined();
    expect(b.stats().reservedCells).toBe(0);
    const c = new Batcher(shard(), limits());
    c.open("short", 64);
    await c.submit("short", tokens(1, 2));
    await c.keep("short", key(""));
    expect(c.stats().prefix).toMatchObject({ entries: 0 });
    expect(c.stats().reservedCells).toBe(0);
  });
});
