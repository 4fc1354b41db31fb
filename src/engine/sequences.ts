// Sequence slots and positions of one engine, shared by every RangeEngine implementation:
// a batch is checked here before the engine sees it, so bad input never reaches native code.
import { EngineError } from "./errors.ts";
import type { DecodeBatch, ModelFacts, SeqId } from "./range-engine.ts";

export class SequenceTable {
  /** next expected position per open sequence */
  readonly #next = new Map<number, number>();

  constructor(readonly maxSequences: number) {}

  get openCount(): number {
    return this.#next.size;
  }

  open(): SeqId {
    for (let s = 0; s < this.maxSequences; s++) {
      if (!this.#next.has(s)) {
        this.#next.set(s, 0);
        return s as SeqId;
      }
    }
    throw new EngineError("kv_full", `all ${this.maxSequences} sequence slots are in use`);
  }

  release(seq: SeqId): void {
    this.nextPosition(seq);
    this.#next.delete(seq);
  }

  nextPosition(seq: SeqId): number {
    const p = this.#next.get(seq);
    if (p === undefined) throw new EngineError("unknown_sequence", `sequence ${seq} is not open`);
    return p;
  }

  /** Takes the sequence back to `pos` (at most where it is). */
  trim(seq: SeqId, pos: number): void {
    const next = this.nextPosition(seq);
    if (!(Number.isInteger(pos) && pos >= 0 && pos <= next)) {
      throw new EngineError("bad_position", `sequence ${seq} is at ${next}; cannot trim it to ${pos}`);
    }
    this.#next.set(seq, pos);
  }

  /** `dst` now holds `src`'s first `pos` positions (a prefix copied), and goes on from there. */
  copy(src: SeqId, dst: SeqId, pos: number): void {
    const held = this.nextPosition(src);
    this.nextPosition(dst);
    if (src === dst || !(Number.isInteger(pos) && pos >= 0 && pos <= held)) {
      throw new EngineError(
        "bad_position",
        `sequence ${src} holds ${held}; cannot copy ${pos} of it to ${dst}`,
      );
    }
    this.#next.set(dst, pos);
  }

  /** The sequence now holds `pos` positions that came from elsewhere (an imported state). */
  restore(seq: SeqId, pos: number): void {
    this.nextPosition(seq);
    if (!(Number.isInteger(pos) && pos >= 0)) throw new EngineError("bad_position", `restored to ${pos}`);
    this.#next.set(seq, pos);
  }

  /** Validates a batch against the shard's facts and the open sequences' positions. */
  check(batch: DecodeBatch, facts: ModelFacts, input: "tokens" | "hidden", batchTokens: number): number {
    const n = batch.seq.length;
    if (n === 0) throw new EngineError("bad_input", "empty batch");
    if (n > batchTokens) {
      throw new EngineError("bad_input", `batch of ${n} tokens exceeds the engine's ${batchTokens}`);
    }
    if (batch.pos.length !== n) {
      throw new EngineError("bad_input", `${batch.pos.length} positions for ${n} tokens`);
    }
    if (batch.outputs && batch.outputs.length !== n) {
      throw new EngineError("bad_input", `${batch.outputs.length} output flags for ${n} tokens`);
    }
    if (input === "tokens") {
      if (!batch.tokens || batch.hidden) throw new EngineError("bad_input", "this shard takes token ids");
      if (batch.tokens.length !== n) {
        throw new EngineError("bad_input", `${batch.tokens.length} tokens for ${n} slots`);
      }
      for (const t of batch.tokens) {
        if (!(t >= 0 && t < facts.nVocab)) {
          throw new EngineError("bad_input", `token id ${t} outside the vocabulary`);
        }
      }
    } else {
      if (!batch.hidden || batch.tokens) throw new EngineError("bad_input", "this shard takes hidden states");
      if (batch.hidden.length !== n * facts.seamWidth) {
        throw new EngineError(
          "bad_input",
          `hidden state of ${batch.hidden.length} floats for ${n} tokens; expected ${n} × ${facts.seamWidth} (the seam width)`,
        );
      }
    }
    // positions of each sequence must continue where it stopped, one by one
    const expect = new Map<number, number>();
    for (let i = 0; i < n; i++) {
      const s = batch.seq[i];
      const want = expect.get(s) ?? this.#next.get(s);
      if (want === undefined) throw new EngineError("unknown_sequence", `sequence ${s} is not open`);
      if (batch.pos[i] !== want) {
        throw new EngineError("bad_position", `sequence ${s} expects position ${want}, got ${batch.pos[i]}`);
      }
      expect.set(s, want + 1);
    }
    let outputs = 0;
    for (let i = 0; i < n; i++) outputs += batch.outputs ? (batch.outputs[i] ? 1 : 0) : 0;
    return outputs;
  }

  /** Advances positions after the engine accepted the batch. */
  commit(batch: DecodeBatch): void {
    for (let i = 0; i < batch.seq.length; i++) this.#next.set(batch.seq[i], batch.pos[i] + 1);
  }
}
