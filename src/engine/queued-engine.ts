// What every RangeEngine shares, whatever computes: sequence slots and positions (checked
// here, so bad input never reaches the engine) and one call at a time on its context.
// Subclasses say how a batch is computed and how KV cells are read and freed.
import { EngineQueue } from "./engine-queue.ts";
import { EngineError } from "./errors.ts";
import type {
  DecodeBatch,
  DecodeOutputs,
  EngineMemory,
  Grammar,
  GrammarSpec,
  ModelFacts,
  RangeEngine,
  SeqId,
  ShardSpec,
} from "./range-engine.ts";
import { SequenceTable } from "./sequences.ts";

/** The KV figures of EngineMemory the engine itself reports. */
export type KvCells = Pick<
  EngineMemory,
  "kvCells" | "kvCellsUsed" | "kvBytes" | "kvCellsPerSequence" | "graphPasses" | "kvLayout" | "computeBytes"
>;

export abstract class QueuedEngine implements RangeEngine {
  abstract readonly kind: "native" | "wasm";
  readonly input: "tokens" | "hidden";
  readonly output: "logits" | "hidden";
  readonly #seqs: SequenceTable;
  protected readonly queue = new EngineQueue();

  protected constructor(
    readonly backend: string,
    readonly facts: ModelFacts,
    readonly recipe: Uint8Array,
    protected readonly spec: Pick<ShardSpec, "maxSequences" | "batchTokens">,
  ) {
    this.input = facts.range.start === 0 ? "tokens" : "hidden";
    this.output = facts.range.end === facts.nLayer ? "logits" : "hidden";
    this.#seqs = new SequenceTable(spec.maxSequences);
  }

  openSequence(): SeqId {
    const seq = this.#seqs.open();
    this.opened(seq);
    return seq;
  }

  nextPosition(seq: SeqId): number {
    return this.#seqs.nextPosition(seq);
  }

  releaseSequence(seq: SeqId): Promise<void> {
    return this.queue.run(async () => {
      this.#seqs.release(seq);
      await this.freeCells(seq);
    });
  }

  /**
   * The sequence's position goes back at once (a batch put together before the trim runs starts
   * its steps there); its cells go in the queue, before any call queued after this. Its caller
   * has no step of the sequence in the engine.
   */
  trimSequence(seq: SeqId, pos: number): Promise<void> {
    try {
      if (pos === this.#seqs.nextPosition(seq)) return Promise.resolve();
      this.#seqs.trim(seq, pos);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.queue.run(() => this.trimCells(seq, pos));
  }

  /** As trimSequence: positions at once, the cells in the queue. */
  copySequence(src: SeqId, dst: SeqId, pos: number): Promise<void> {
    try {
      this.#seqs.copy(src, dst, pos);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.queue.run(() => this.copyCells(src, dst, pos));
  }

  async canCopySequences(): Promise<boolean> {
    return (await this.memory()).kvLayout === "ordered";
  }

  exportSequence(seq: SeqId): Promise<Uint8Array> {
    try {
      this.#seqs.nextPosition(seq);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.queue.run(() => this.exportCells(seq));
  }

  /** The position is known once the engine took the state: the caller decodes nothing on seq meanwhile. */
  importSequence(seq: SeqId, state: Uint8Array): Promise<number> {
    try {
      this.#seqs.restore(seq, 0);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.queue.run(async () => {
      const held = await this.importCells(seq, state);
      this.#seqs.restore(seq, held);
      return held;
    });
  }

  decode(batch: DecodeBatch): Promise<DecodeOutputs> {
    return this.queue.run(() => {
      this.#seqs.check(batch, this.facts, this.input, this.spec.batchTokens);
      return this.compute(batch, () => this.#seqs.commit(batch));
    });
  }

  /** Read in the engine's queue: never while a decode changes the KV cache. */
  memory(): Promise<EngineMemory> {
    return this.queue.run(async () => {
      const kv = await this.kvCells();
      return {
        weightBytes: this.facts.weightBytes,
        kvCells: kv.kvCells,
        kvCellsUsed: kv.kvCellsUsed,
        kvBytes: kv.kvBytes,
        sequencesOpen: this.#seqs.openCount,
        maxSequences: this.spec.maxSequences,
        kvCellsPerSequence: kv.kvCellsPerSequence,
        graphPasses: kv.graphPasses,
        kvLayout: kv.kvLayout,
        computeBytes: kv.computeBytes,
      };
    });
  }

  close(): Promise<void> {
    return this.queue.close(() => this.free());
  }

  abstract grammar(spec: GrammarSpec): Promise<Grammar>;

  /** A slot was claimed (an engine elsewhere mirrors it); nothing by default. */
  protected opened(_seq: SeqId): void {}
  /**
   * Computes a checked batch; `accepted` advances the sequences' positions, called as soon
   * as the engine has taken the batch into its KV cache (before its outputs are read).
   */
  protected abstract compute(batch: DecodeBatch, accepted: () => void): Promise<DecodeOutputs>;
  protected abstract freeCells(seq: SeqId): void | Promise<void>;
  protected abstract trimCells(seq: SeqId, pos: number): void | Promise<void>;
  protected abstract copyCells(src: SeqId, dst: SeqId, pos: number): void | Promise<void>;
  protected abstract kvCells(): KvCells | Promise<KvCells>;
  protected exportCells(_seq: SeqId): Promise<Uint8Array> {
    return Promise.reject(
      new EngineError("bad_input", `a ${this.kind} engine here cannot export a sequence`),
    );
  }
  protected importCells(_seq: SeqId, _state: Uint8Array): Promise<number> {
    return Promise.reject(
      new EngineError("bad_input", `a ${this.kind} engine here cannot import a sequence`),
    );
  }
  protected abstract free(): void | Promise<void>;
}
