import { describe, expect, it } from "vitest";
import { Batcher } from "../../src/scheduler/batcher.ts";
import type { DecodeBatch, RangeEngine, SeqId } from "../../src/engine/range-engine.ts";
import { layerRange } from "../../src/engine/layer-range.ts";

/** An engine that decodes instantly: one logit row per marked output; positions counted per sequence. */
function fakeEngine(): RangeEngine & { released: number[] } {
  const next = new Map<number, number>();
  let seqs = 0;
  const released: number[] = [];
  return {
    kind: "native",
    backend: "fake",
    recipe: new Uint8Array(32),
    input: "tokens",
    output: "logits",
    facts: {
      arch: "llama",
      nLayer: 2,
      seamWidth: 4,
      nVocab: 8,
      nCtxTrain: 4096,
      nHead: 1,
      nHeadKv: 1,
      nExpert: 0,
      range: layerRange(0, 2),
      weightBytes: 0,
    },
    released,
    openSequence: () => {
      const s = seqs++ as SeqId;
      next.set(s, 0);
      return s;
    },
    nextPosition: (s: SeqId) => next.get(s) ?? 0,
    releaseSequence: (s: SeqId) => {
      next.delete(s);
      released.push(s);
      return Promise.resolve();
    },
    trimSequence: (s: SeqId, pos: number) => {
      next.set(s, pos);
      return Promise.resolve();
    },
    decode: (b: DecodeBatch) => {
      for (const s of b.seq) next.set(s, (next.get(s) ?? 0) + 1);
      const rows = b.outputs?.reduce((n, o) => n + o, 0) ?? 0;
      return Promise.resolve({ rows, dim: 8, data: new Float32Array(rows * 8) });
    },
    memory: () => Promise.reject(new Error("unused")),
    grammar: () => Promise.reject(new Error("this engine has no grammar")),
    close: () => Promise.resolve(),
  };
}
const tokens = (n: number) => ({ tokens: new Int32Array(n).fill(1), wantLogits: true });

describe("KV cells claimed as sessions grow", () => {
  it("reserves nothing at open: a session asking for the whole pool leaves room for others", async () => {
    const b = new Batcher(fakeEngine(), { maxBatchTokens: 64, maxQueuedPerSession: 4, kvCells: 100 });
    b.open("long", 100); // a request without max_tokens asks for all it may use
    b.open("short", 20);
    await b.submit("long", tokens(10));
    await b.submit("short", tokens(10));
    expect(b.stats().reservedCells).toBe(20);
  });

  it("ends a session past its own cap with context_full", async () => {
    const b = new Batcher(fakeEngine(), { maxBatchTokens: 64, maxQueuedPerSession: 4, kvCells: 100 });
    b.open("s", 12);
    await b.submit("s", tokens(10));
    await b.submit("s", tokens(1));
    await b.submit("s", tokens(1));
    await expect(b.submit("s", tokens(1))).rejects.toMatchObject({ code: "context_full" });
  });

  it("refuses a cap past one session's share (batch-invariant streams)", () => {
    const b = new Batcher(fakeEngine(), {
      maxBatchTokens: 64,
      maxQueuedPerSession: 4,
      kvCells: 100,
      kvCellsPerSession: 25,
    });
    expect(() => b.open("s", 26)).toThrow(/one session holds at most 25 here/);
  });

  it("when the shared pool runs short, the youngest session gives way; the oldest runs on", async () => {
    const e = fakeEngine();
    const b = new Batcher(e, { maxBatchTokens: 64, maxQueuedPerSession: 4, kvCells: 40 });
    b.open("old", 40);
    b.open("mid", 40);
    b.open("young", 40);
    await b.submit("old", tokens(15));
    await b.submit("mid", tokens(10));
    await b.submit("young", tokens(10));
    const youngNext = b.submit("young", tokens(1)); // fits: 36 of 40
    await youngNext;
    // old needs 10 more: young (the youngest) is ended and its 11 cells freed
    await b.submit("old", tokens(10));
    expect(b.stats()).toMatchObject({ sessions: 2, reservedCells: 35, preempted: 1 });
    // its next step hears why it ended
    await expect(b.submit("young", tokens(1))).rejects.toMatchObject({ code: "context_full" });
    // the asker is the youngest left and nothing younger can give way: its own step is refused
    await expect(b.submit("mid", tokens(10))).rejects.toMatchObject({ code: "context_full" });
    await b.release("old");
    await b.release("mid");
    expect(b.stats().reservedCells).toBe(0);
    expect(e.released).toHaveLength(3);
  });
});
