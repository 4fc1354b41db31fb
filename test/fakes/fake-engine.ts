// A RangeEngine that computes something a test can check instead of a model. Every hidden row
// says which token and position it was computed for and how many layers it went through:
//   row = [token, position, layers done, salt(token, position, k) ...]
// A shard fed hidden states refuses a row made for another position or by a shard that does
// not end where it starts, so a row handed to the wrong session or out of order fails loudly.
// The last shard's logits peak at expectedToken(token, position) with a height equal to the
// layers done, so greedy sampling picks a known token with margin = layers the row crossed.
// Slots, positions and the one-call-at-a-time queue are the project's own (SequenceTable,
// EngineQueue), as in both real engines; KV cells are counted per sequence like llama.cpp's.
import { EngineQueue } from "../../src/engine/engine-queue.ts";
import { EngineError } from "../../src/engine/errors.ts";
import { type LayerRange, layerRange } from "../../src/engine/layer-range.ts";
import type {
  DecodeBatch,
  DecodeOutputs,
  EngineMemory,
  Grammar,
  GrammarSpec,
  KvLayout,
  ModelFacts,
  RangeEngine,
  SeqId,
} from "../../src/engine/range-engine.ts";
import { SequenceTable } from "../../src/engine/sequences.ts";

export interface FakeEngineOptions {
  /** the layers this engine holds; input and output follow from it as on a real shard */
  readonly range?: { readonly start: number; readonly end: number };
  readonly nLayer?: number;
  readonly nEmbd?: number;
  readonly nVocab?: number;
  /** KV cells of all sequences together */
  readonly kvCells?: number;
  readonly maxSequences?: number;
  /** most tokens one decode call may carry */
  readonly batchTokens?: number;
  /** true: each sequence owns kvCells / maxSequences cells (KV layout "streams"); false
   *  (default): one pool any sequence may fill, as the ordered pool of a batch-invariant engine */
  readonly streams?: boolean;
  /** the engine recipe fingerprint (32 bytes) */
  readonly recipe?: Uint8Array;
  /** what it calls its backend (default "fake"); "wasm-cpu" makes a node reuse prefixes on it */
  readonly backend?: string;
  /** the engine kind it plays (default "wasm"); a node takes KV snapshots only into "native" */
  readonly kind?: "native" | "wasm";
}

/** One decode call as the engine saw it (copies: the caller's arrays are its own). */
export interface FakeCall {
  readonly seq: number[];
  readonly pos: number[];
  readonly outputs: number[];
  /** token ids (first shard) or the token each hidden row names */
  readonly tokens: number[];
}

const SALT = 3;
/** the first word of the fake's sequence state */
const FAKE_STATE = 0x4b56_4b46;

/** The salt at element k of the row for (token, pos): nothing a mix-up could reproduce. */
const salt = (token: number, pos: number, k: number) => ((token * 131 + pos * 17 + k * 7) % 97) / 97;

/** The hidden row a shard ending at layer `layersDone` outputs for (token, pos). */
export function hiddenRow(token: number, pos: number, layersDone: number, nEmbd = 8): Float32Array {
  const row = new Float32Array(nEmbd);
  row[0] = token;
  row[1] = pos;
  row[2] = layersDone;
  for (let k = SALT; k < nEmbd; k++) row[k] = salt(token, pos, k);
  return row;
}

/** Rows for consecutive tokens starting at `start`, as a shard ending at `layersDone` gives them. */
export function hiddenRows(tokens: readonly number[], start: number, layersDone: number, nEmbd = 8) {
  const out = new Float32Array(tokens.length * nEmbd);
  tokens.forEach((t, i) => out.set(hiddenRow(t, start + i, layersDone, nEmbd), i * nEmbd));
  return out;
}

/** The token the last shard's logits favour after `token` at `pos`. */
export const expectedToken = (token: number, pos: number, nVocab = 32) => (token * 7 + pos + 1) % nVocab;

export class FakeEngine implements RangeEngine {
  readonly kind: "native" | "wasm";
  readonly backend: string;
  readonly recipe: Uint8Array;
  readonly facts: ModelFacts;
  readonly input: "tokens" | "hidden";
  readonly output: "logits" | "hidden";
  readonly calls: FakeCall[] = [];
  readonly released: SeqId[] = [];
  /** prefixes copied from one sequence to another */
  readonly copies: { src: SeqId; dst: SeqId; pos: number }[] = [];
  readonly grammarTokens: number[] = [];
  readonly kvCells: number;
  readonly perSequence: number;
  readonly kvLayout: KvLayout;
  /** engine calls so far: every batch is one graph pass */
  #passes = 0;
  readonly batchTokens: number;
  readonly #seqs: SequenceTable;
  readonly #queue = new EngineQueue();
  #paused = false;
  #waiting: Array<() => void> = [];
  #callWaiters: Array<{ n: number; resolve: () => void }> = [];
  #failures: Array<(b: DecodeBatch) => EngineError | undefined> = [];

  constructor(o: FakeEngineOptions = {}) {
    const nLayer = o.nLayer ?? 4;
    const range: LayerRange = layerRange(o.range?.start ?? 0, o.range?.end ?? nLayer, nLayer);
    this.facts = {
      arch: "llama",
      nLayer,
      seamWidth: o.nEmbd ?? 8,
      nVocab: o.nVocab ?? 32,
      nCtxTrain: 4096,
      nHead: 1,
      nHeadKv: 1,
      nExpert: 0,
      range,
      weightBytes: 0,
    };
    if (this.facts.seamWidth <= SALT) throw new Error("the fake engine needs n_embd > 3");
    this.input = range.start === 0 ? "tokens" : "hidden";
    this.output = range.end === nLayer ? "logits" : "hidden";
    this.kvCells = o.kvCells ?? 256;
    const maxSequences = o.maxSequences ?? 8;
    this.perSequence = o.streams ? Math.floor(this.kvCells / maxSequences) : this.kvCells;
    this.kvLayout = o.streams ? "streams" : "ordered";
    this.batchTokens = o.batchTokens ?? 512;
    this.#seqs = new SequenceTable(maxSequences);
    this.recipe = o.recipe ?? new Uint8Array(32).fill(0x5e);
    this.backend = o.backend ?? "fake";
    this.kind = o.kind ?? "wasm";
  }

  /** Cells the open sequences hold: one per position each has committed. */
  get cellsUsed(): number {
    let n = 0;
    for (let s = 0; s < this.#seqs.maxSequences; s++) n += this.#cellsOf(s);
    return n;
  }

  get openSequences(): number {
    return this.#seqs.openCount;
  }

  // ---- what a test controls ----

  /** Later decode calls wait (after being recorded) until resume() or letOneThrough(). */
  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    this.#paused = false;
    for (const go of this.#waiting.splice(0)) go();
  }

  /** Lets the waiting decode call run; the ones after it still wait. */
  letOneThrough(): void {
    this.#waiting.shift()?.();
  }

  /** Resolves once `n` decode calls have started (recorded, possibly waiting). */
  called(n: number): Promise<void> {
    if (this.calls.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.#callWaiters.push({ n, resolve }));
  }

  /** Fails decode calls the predicate picks (an error returned is thrown), until it is removed. */
  failWhen(pick: (b: DecodeBatch) => EngineError | undefined): () => void {
    this.#failures.push(pick);
    return () => (this.#failures = this.#failures.filter((f) => f !== pick));
  }

  // ---- RangeEngine ----

  openSequence(): SeqId {
    return this.#seqs.open();
  }

  nextPosition(seq: SeqId): number {
    return this.#seqs.nextPosition(seq);
  }

  releaseSequence(seq: SeqId): Promise<void> {
    // queued behind a running decode, as in both real engines
    return this.#queue.run(() => {
      this.#seqs.release(seq);
      this.released.push(seq);
    });
  }

  trimSequence(seq: SeqId, pos: number): Promise<void> {
    // the position at once, the cells in the queue: as QueuedEngine does
    try {
      this.#seqs.trim(seq, pos);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#queue.run(() => {});
  }

  copySequence(src: SeqId, dst: SeqId, pos: number): Promise<void> {
    try {
      this.#seqs.copy(src, dst, pos);
    } catch (e) {
      return Promise.reject(e);
    }
    this.copies.push({ src, dst, pos });
    return this.#queue.run(() => {});
  }

  canCopySequences(): Promise<boolean> {
    return Promise.resolve(this.kvLayout === "ordered");
  }

  /** The fake's state: its range and positions, 16 bytes a position (llama.cpp's grows so too). */
  exportSequence(seq: SeqId): Promise<Uint8Array> {
    return this.#queue.run(() => {
      const n = this.#seqs.nextPosition(seq);
      const words = new Uint32Array(4 + 4 * n);
      words.set([FAKE_STATE, this.facts.range.start, this.facts.range.end, n]);
      return new Uint8Array(words.buffer);
    });
  }

  /** Refuses another range's state, as llama.cpp refuses another layer count or width. */
  importSequence(seq: SeqId, state: Uint8Array): Promise<number> {
    try {
      this.#seqs.restore(seq, 0);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#queue.run(() => {
      const w = new Uint32Array(state.slice().buffer, 0, Math.floor(state.length / 4));
      const { start, end } = this.facts.range;
      if (w[0] !== FAKE_STATE || w[1] !== start || w[2] !== end || state.length !== 16 + 16 * w[3]) {
        throw new EngineError("bad_input", "not a state of this engine's range");
      }
      this.#seqs.restore(seq, w[3]);
      return w[3];
    });
  }

  decode(batch: DecodeBatch): Promise<DecodeOutputs> {
    return this.#queue.run(async () => {
      const call: FakeCall = {
        seq: [...batch.seq],
        pos: [...batch.pos],
        outputs: [...(batch.outputs ?? [])],
        tokens: batch.tokens ? [...batch.tokens] : this.#rowTokens(batch.hidden),
      };
      this.calls.push(call);
      for (const w of this.#callWaiters.filter((w) => this.calls.length >= w.n)) w.resolve();
      this.#callWaiters = this.#callWaiters.filter((w) => this.calls.length < w.n);
      if (this.#paused) await new Promise<void>((go) => this.#waiting.push(go));
      this.#seqs.check(batch, this.facts, this.input, this.batchTokens);
      for (const pick of this.#failures) {
        const e = pick(batch);
        if (e) throw e;
      }
      this.#checkRows(batch);
      this.#checkCells(batch);
      const out = this.#compute(batch);
      this.#seqs.commit(batch);
      this.#passes++;
      return { ...out, passes: 1 };
    });
  }

  /**
   * The fake's grammar: "allow 3 5 7" allows those tokens at every step (a real grammar needs a
   * real vocabulary: the engine tests run llama.cpp's). Tokens it accepted go to `grammarTokens`.
   */
  grammar(spec: GrammarSpec): Promise<Grammar> {
    const m = /^allow((?: \d+)+)$/.exec(spec.gbnf);
    if (!m) {
      return Promise.reject(
        new EngineError("bad_input", `the fake grammar reads "allow <ids>", not "${spec.gbnf}"`),
      );
    }
    const allowed = new Set(m[1].trim().split(" ").map(Number));
    const accepted = this.grammarTokens;
    return Promise.resolve({
      mask(logits: Float32Array) {
        for (let t = 0; t < logits.length; t++) if (!allowed.has(t)) logits[t] = -Infinity;
        return Promise.resolve();
      },
      accept(token: number) {
        if (!allowed.has(token)) {
          return Promise.reject(new EngineError("bad_input", `token ${token} not allowed`));
        }
        accepted.push(token);
        return Promise.resolve();
      },
      close: () => Promise.resolve(),
    });
  }

  memory(): Promise<EngineMemory> {
    return this.#queue.run(() => ({
      weightBytes: 0,
      kvCells: this.kvCells,
      kvCellsUsed: this.cellsUsed,
      kvBytes: this.cellsUsed * 64,
      sequencesOpen: this.#seqs.openCount,
      maxSequences: this.#seqs.maxSequences,
      kvCellsPerSequence: this.perSequence,
      graphPasses: this.#passes,
      kvLayout: this.kvLayout,
      computeBytes: 0,
    }));
  }

  close(): Promise<void> {
    return this.#queue.close(() => {});
  }

  // ---- the computation ----

  #cellsOf(seq: number): number {
    try {
      return this.#seqs.nextPosition(seq as SeqId);
    } catch {
      return 0; // not open
    }
  }

  #rowTokens(hidden: Float32Array | undefined): number[] {
    const w = this.facts.seamWidth;
    return Array.from({ length: (hidden?.length ?? 0) / w }, (_, i) => Math.round(hidden![i * w]));
  }

  /** Hidden rows must be the previous shard's output for exactly this position. */
  #checkRows(b: DecodeBatch): void {
    if (!b.hidden) return;
    const w = this.facts.seamWidth;
    for (let i = 0; i < b.seq.length; i++) {
      const row = b.hidden.subarray(i * w, (i + 1) * w);
      if (!row.every(Number.isFinite)) throw new EngineError("bad_input", `row ${i} is not finite`);
      if (Math.round(row[1]) !== b.pos[i]) {
        throw new EngineError(
          "bad_input",
          `row ${i} was computed for position ${row[1]}, fed at ${b.pos[i]}`,
        );
      }
      if (Math.round(row[2]) !== this.facts.range.start) {
        throw new EngineError(
          "bad_input",
          `row ${i} went through ${row[2]} layers; this shard starts at ${this.facts.range.start}`,
        );
      }
    }
  }

  /** A decode that would take a sequence past its cells, or the pool past its size, is refused whole. */
  #checkCells(b: DecodeBatch): void {
    const after = new Map<number, number>();
    for (let i = 0; i < b.seq.length; i++) {
      after.set(b.seq[i], Math.max(after.get(b.seq[i]) ?? 0, b.pos[i] + 1));
    }
    let total = this.cellsUsed;
    for (const [s, cells] of after) {
      if (cells > this.perSequence) {
        throw new EngineError(
          "kv_full",
          `sequence ${s} needs ${cells} cells; it may hold ${this.perSequence}`,
        );
      }
      total += cells - this.#cellsOf(s);
    }
    if (total > this.kvCells) throw new EngineError("kv_full", `${total} cells needed of ${this.kvCells}`);
  }

  #compute(b: DecodeBatch): DecodeOutputs {
    const { seamWidth: nEmbd, nVocab, range } = this.facts;
    const tokens = b.tokens ? [...b.tokens] : this.#rowTokens(b.hidden);
    if (this.output === "hidden") {
      const data = new Float32Array(b.seq.length * nEmbd);
      for (let i = 0; i < b.seq.length; i++) {
        data.set(hiddenRow(tokens[i], b.pos[i], range.end, nEmbd), i * nEmbd);
      }
      return { rows: b.seq.length, dim: nEmbd, data };
    }
    const marked = [...Array(b.seq.length).keys()].filter((i) => b.outputs?.[i]);
    const data = new Float32Array(marked.length * nVocab);
    marked.forEach((i, r) => (data[r * nVocab + expectedToken(tokens[i], b.pos[i], nVocab)] = range.end));
    return { rows: marked.length, dim: nVocab, data };
  }
}
