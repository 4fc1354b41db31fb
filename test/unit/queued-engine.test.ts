// QueuedEngine, the base of both real engines, over FakeEngine's compute: what it checks before
// an engine sees a batch (and the exact errors), the order its queue keeps, sequence slots and
// positions, and closing. The outputs themselves are the fake's; only the base is under test.
import { describe, expect, it } from "vitest";
import { EngineError } from "../../src/engine/errors.ts";
import { type KvCells, QueuedEngine } from "../../src/engine/queued-engine.ts";
import type { DecodeBatch, DecodeOutputs, Grammar, SeqId } from "../../src/engine/range-engine.ts";
import { FakeEngine, type FakeEngineOptions, hiddenRows } from "../fakes/fake-engine.ts";

const first = (o: FakeEngineOptions = {}) => new FakeEngine({ range: { start: 0, end: 2 }, nLayer: 4, ...o });
const later = (o: FakeEngineOptions = {}) => new FakeEngine({ range: { start: 2, end: 4 }, nLayer: 4, ...o });

/** Token ids for one sequence, from `start` on. */
const tokens = (seq: SeqId, ids: number[], start = 0): DecodeBatch => ({
  tokens: Int32Array.from(ids),
  seq: new Int32Array(ids.length).fill(seq),
  pos: Int32Array.from(ids, (_, i) => start + i),
});

/** What a call threw or its promise was refused with: the code and message. */
async function refusal(p: Promise<unknown> | (() => unknown)): Promise<{ code: string; message: string }> {
  try {
    await (typeof p === "function" ? p() : p);
  } catch (e) {
    if (e instanceof EngineError) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error("not refused");
}

/** Whether the promise has settled once pending callbacks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(() => (done = true), () => (done = true));
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return done;
}

describe("QueuedEngine: a batch checked before the engine sees it", () => {
  it("takes token ids on a first shard and hidden states on the others, from the range", () => {
    expect([first().input, first().output]).toEqual(["tokens", "hidden"]);
    expect([later().input, later().output]).toEqual(["hidden", "logits"]);
  });

  it("refuses each malformed batch with its code and message, and never computes it", async () => {
    const e = first({ batchTokens: 4, nVocab: 32 });
    const s = e.openSequence();
    const one = (extra: Partial<DecodeBatch>): DecodeBatch => ({ ...tokens(s, [1]), ...extra });
    const cases: Array<[DecodeBatch, string, string]> = [
      [
        { tokens: new Int32Array(0), seq: new Int32Array(0), pos: new Int32Array(0) },
        "bad_input",
        "empty batch",
      ],
      [tokens(s, [1, 2, 3, 4, 5]), "bad_input", "batch of 5 tokens exceeds the engine's 4"],
      [one({ pos: Int32Array.of(0, 1) }), "bad_input", "2 positions for 1 tokens"],
      [one({ outputs: Uint8Array.of(1, 1) }), "bad_input", "2 output flags for 1 tokens"],
      [one({ tokens: undefined, hidden: new Float32Array(8) }), "bad_input", "this shard takes token ids"],
      [one({ hidden: new Float32Array(8) }), "bad_input", "this shard takes token ids"],
      [one({ tokens: Int32Array.of(1, 2) }), "bad_input", "2 tokens for 1 slots"],
      [one({ tokens: Int32Array.of(32) }), "bad_input", "token id 32 outside the vocabulary"],
      [one({ tokens: Int32Array.of(-1) }), "bad_input", "token id -1 outside the vocabulary"],
      [one({ seq: Int32Array.of(5) }), "unknown_sequence", "sequence 5 is not open"],
      [one({ pos: Int32Array.of(1) }), "bad_position", "sequence 0 expects position 0, got 1"],
      [
        { ...tokens(s, [1, 2]), pos: Int32Array.of(0, 0) },
        "bad_position",
        "sequence 0 expects position 1, got 0",
      ],
    ];
    for (const [batch, code, message] of cases) {
      expect(await refusal(e.decode(batch))).toEqual({ code, message });
    }
    expect(e.calls).toEqual([]);
    expect(e.nextPosition(s)).toBe(0);
  });

  it("refuses hidden states of another width, or token ids, on a later shard", async () => {
    const e = later();
    const s = e.openSequence();
    const rows = { seq: Int32Array.of(s), pos: Int32Array.of(0) };
    expect(await refusal(e.decode({ ...rows, hidden: new Float32Array(7) }))).toEqual({
      code: "bad_input",
      message: "hidden state of 7 floats for 1 tokens; expected 1 × 8 (the seam width)",
    });
    expect(await refusal(e.decode({ ...rows, tokens: Int32Array.of(1) }))).toEqual({
      code: "bad_input",
      message: "this shard takes hidden states",
    });
    expect((await e.decode({ ...rows, hidden: hiddenRows([1], 0, 2), outputs: Uint8Array.of(1) })).rows).toBe(
      1,
    );
  });

  it("checks each batch in the queue, against the positions the batches before it left", async () => {
    const e = first();
    const s = e.openSequence();
    e.pause();
    // the second is put together before the first ran: it starts where the first will end
    const a = e.decode(tokens(s, [1, 2]));
    const b = e.decode(tokens(s, [3], 2));
    const stale = e.decode(tokens(s, [4], 2));
    expect(e.nextPosition(s)).toBe(0);
    e.resume();
    await Promise.all([a, b]);
    expect(await refusal(stale)).toEqual({
      code: "bad_position",
      message: "sequence 0 expects position 3, got 2",
    });
    expect(e.nextPosition(s)).toBe(3);
    expect(e.calls.map((c) => c.pos)).toEqual([[0, 1], [2]]);
  });

  it("leaves positions where they were when the engine refuses a batch it checked (KV full), and goes on", async () => {
    const e = first({ kvCells: 4 });
    const [a, b] = [e.openSequence(), e.openSequence()];
    await e.decode(tokens(a, [1, 2, 3]));
    expect(await refusal(e.decode(tokens(b, [1, 2])))).toEqual({
      code: "kv_full",
      message: "5 cells needed of 4",
    });
    expect([e.nextPosition(a), e.nextPosition(b)]).toEqual([3, 0]);
    await e.releaseSequence(a);
    await e.decode(tokens(b, [1, 2]));
    expect(e.nextPosition(b)).toBe(2);
    expect((await e.memory()).kvCellsUsed).toBe(2);
  });
});

describe("QueuedEngine: one engine call at a time, in the order they came", () => {
  it("runs decodes one by one in call order", async () => {
    const e = first();
    const seqs = [e.openSequence(), e.openSequence(), e.openSequence()];
    e.pause();
    const done = seqs.map((s) => e.decode(tokens(s, [s + 1])));
    await e.called(1);
    expect(e.calls.map((c) => c.seq)).toEqual([[0]]);
    e.letOneThrough();
    await done[0];
    await e.called(2);
    expect(e.calls.map((c) => c.seq)).toEqual([[0], [1]]);
    expect(await settled(done[2])).toBe(false);
    e.resume();
    await Promise.all(done);
    expect(e.calls.map((c) => c.seq)).toEqual([[0], [1], [2]]);
  });

  it("releases a sequence behind the decode that runs: its position stays readable until then", async () => {
    const e = first();
    const s = e.openSequence();
    e.pause();
    const decoding = e.decode(tokens(s, [1, 2]));
    await e.called(1);
    const releasing = e.releaseSequence(s);
    expect(await settled(releasing)).toBe(false);
    expect(e.nextPosition(s)).toBe(0);
    e.resume();
    await Promise.all([decoding, releasing]);
    expect(e.released).toEqual([s]);
    expect(await refusal(() => e.nextPosition(s))).toEqual({
      code: "unknown_sequence",
      message: "sequence 0 is not open",
    });
    expect(e.openSequence()).toBe(s); // the freed slot is the first one handed out again
  });

  it("reads memory in the queue: never while a decode runs", async () => {
    const e = first({ kvCells: 64, maxSequences: 3 });
    const s = e.openSequence();
    e.pause();
    const decoding = e.decode(tokens(s, [1, 2, 3]));
    const memory = e.memory();
    expect(await settled(memory)).toBe(false);
    e.resume();
    await decoding;
    expect(await memory).toMatchObject({
      kvCells: 64,
      kvCellsUsed: 3,
      sequencesOpen: 1,
      maxSequences: 3,
      graphPasses: 1,
      weightBytes: 0,
    });
  });

  it("closes after everything queued; later calls are refused, closing again is the same close", async () => {
    const e = first();
    const s = e.openSequence();
    e.pause();
    const decoding = e.decode(tokens(s, [1]));
    const closing = e.close();
    expect(e.close()).toBe(closing);
    e.resume();
    await Promise.all([decoding, closing]);
    const closed = { code: "engine_failed", message: "engine is closed" };
    expect(await refusal(e.decode(tokens(s, [2], 1)))).toEqual(closed);
    expect(await refusal(e.releaseSequence(s))).toEqual(closed);
    expect(await refusal(e.memory())).toEqual(closed);
  });
});

describe("QueuedEngine: sequence slots and positions", () => {
  it("hands out the lowest free slot and refuses one past the budget", async () => {
    const e = first({ maxSequences: 2 });
    expect([e.openSequence(), e.openSequence()]).toEqual([0, 1]);
    expect(await refusal(() => e.openSequence())).toEqual({
      code: "kv_full",
      message: "all 2 sequence slots are in use",
    });
    expect(await refusal(e.releaseSequence(7 as SeqId))).toEqual({
      code: "unknown_sequence",
      message: "sequence 7 is not open",
    });
    expect(e.released).toEqual([]); // the engine's cells are not touched for a slot never opened
  });

  it("trims a position at once and the cells in the queue; trimming to where it is waits for nothing", async () => {
    const e = first();
    const [a, b] = [e.openSequence(), e.openSequence()];
    await e.decode(tokens(a, [1, 2, 3]));
    e.pause();
    const decoding = e.decode(tokens(b, [1]));
    await e.called(2);
    expect(await settled(e.trimSequence(a, 3))).toBe(true);
    const trimming = e.trimSequence(a, 1);
    expect(e.nextPosition(a)).toBe(1);
    expect(await settled(trimming)).toBe(false);
    expect(await refusal(e.trimSequence(a, 2))).toEqual({
      code: "bad_position",
      message: "sequence 0 is at 1; cannot trim it to 2",
    });
    expect(await refusal(e.trimSequence(5 as SeqId, 0))).toEqual({
      code: "unknown_sequence",
      message: "sequence 5 is not open",
    });
    e.resume();
    await Promise.all([decoding, trimming]);
    await e.decode(tokens(a, [9], 1));
    expect(e.nextPosition(a)).toBe(2);
  });

  it("copies a prefix: the positions at once, the cells in the queue, only what the source holds", async () => {
    const e = first();
    const [src, dst] = [e.openSequence(), e.openSequence()];
    await e.decode(tokens(src, [1, 2, 3]));
    e.pause();
    const decoding = e.decode(tokens(src, [4], 3));
    await e.called(2);
    const copying = e.copySequence(src, dst, 2);
    expect(e.nextPosition(dst)).toBe(2);
    expect(e.copies).toEqual([]);
    e.resume();
    await Promise.all([decoding, copying]);
    expect(e.copies).toEqual([{ src, dst, pos: 2 }]);
    expect(await refusal(e.copySequence(src, dst, 5))).toEqual({
      code: "bad_position",
      message: "sequence 0 holds 4; cannot copy 5 of it to 1",
    });
    expect(await refusal(e.copySequence(src, src, 1))).toEqual({
      code: "bad_position",
      message: "sequence 0 holds 4; cannot copy 1 of it to 0",
    });
    expect(await refusal(e.copySequence(src, 6 as SeqId, 1))).toEqual({
      code: "unknown_sequence",
      message: "sequence 6 is not open",
    });
  });

  it("copies sequences only on an ordered KV pool", async () => {
    expect(await first().canCopySequences()).toBe(true);
    expect(await first({ streams: true }).canCopySequences()).toBe(false);
  });

  it("moves a sequence's state: at 0 at once on import, then where the state ends; refused state leaves it at 0", async () => {
    const [from, to] = [first(), first()];
    const s = from.openSequence();
    await from.decode(tokens(s, [1, 2, 3]));
    const state = await from.exportSequence(s);
    const t = to.openSequence();
    await to.decode(tokens(t, [7]));
    const importing = to.importSequence(t, state);
    expect(to.nextPosition(t)).toBe(0);
    expect(await importing).toBe(3);
    expect(to.nextPosition(t)).toBe(3);
    await to.decode(tokens(t, [4], 3));

    const other = later();
    const o = other.openSequence();
    expect(await refusal(other.importSequence(o, state))).toEqual({
      code: "bad_input",
      message: "not a state of this engine's range",
    });
    expect(other.nextPosition(o)).toBe(0);
    expect(await refusal(from.exportSequence(4 as SeqId))).toEqual({
      code: "unknown_sequence",
      message: "sequence 4 is not open",
    });
    expect(await refusal(from.importSequence(4 as SeqId, state))).toEqual({
      code: "unknown_sequence",
      message: "sequence 4 is not open",
    });
  });
});

/** A QueuedEngine that only logs which of its hooks ran, and keeps every default. */
class HookLog extends QueuedEngine {
  readonly kind = "native" as const;
  readonly log: string[] = [];
  constructor() {
    super("log", first().facts, new Uint8Array(32), { maxSequences: 2, batchTokens: 8 });
  }
  grammar(): Promise<Grammar> {
    return Promise.reject(new Error("no grammar"));
  }
  protected override opened(seq: SeqId) {
    this.log.push(`opened ${seq}`);
  }
  protected compute(b: DecodeBatch, accepted: () => void): Promise<DecodeOutputs> {
    this.log.push(`compute ${b.seq.length}`);
    accepted();
    return Promise.resolve({ rows: 0, dim: 8, data: new Float32Array(0) });
  }
  protected freeCells(seq: SeqId) {
    this.log.push(`free cells ${seq}`);
  }
  protected trimCells(seq: SeqId, pos: number) {
    this.log.push(`trim ${seq} to ${pos}`);
  }
  protected copyCells() {
    this.log.push("copy");
  }
  protected kvCells(): KvCells {
    return {
      kvCells: 8,
      kvCellsUsed: 0,
      kvBytes: 0,
      kvCellsPerSequence: 8,
      graphPasses: 0,
      kvLayout: "streams",
      computeBytes: 0,
    };
  }
  protected free() {
    this.log.push("free");
  }
}

describe("QueuedEngine: the hooks an engine supplies", () => {
  it("calls each hook once per call, in order, and frees the engine once at close", async () => {
    const e = new HookLog();
    const s = e.openSequence();
    await e.decode(tokens(s, [1, 2]));
    await e.trimSequence(s, 1);
    await e.releaseSequence(s);
    await Promise.all([e.close(), e.close()]);
    expect(e.log).toEqual(["opened 0", "compute 2", "trim 0 to 1", "free cells 0", "free"]);
  });

  it("refuses to export or import a sequence unless the engine says how", async () => {
    const e = new HookLog();
    const s = e.openSequence();
    expect(await refusal(e.exportSequence(s))).toEqual({
      code: "bad_input",
      message: "a native engine here cannot export a sequence",
    });
    expect(await refusal(e.importSequence(s, new Uint8Array(16)))).toEqual({
      code: "bad_input",
      message: "a native engine here cannot import a sequence",
    });
    expect(await e.canCopySequences()).toBe(false);
  });
});
