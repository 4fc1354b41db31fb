// A RangeEngine that computes something a test can check instead of a model. Every hidden row
// says which token and position it was computed for and how many layers it went through:
//   row = [token, position, layers done, salt(token, position, k) ...]
// A shard fed hidden states refuses a row made for another position or by a shard that does
// not end where it starts, so a row handed to the wrong session or out of order fails loudly.
// The last shard's logits peak at expectedToken(token, position) with a height equal to the
// layers done, so greedy sampling picks a known token with margin = layers the row crossed.
// It is a QueuedEngine, as both real engines are: slots, positions, the batch checks and the
// one-call-at-a-time queue are the production ones; the fake supplies only what llama.cpp does
// below them (the outputs, KV cells counted per sequence, a sequence's state).
import { EngineError } from "../../src/engine/errors.ts";
import { layerRange } from "../../src/engine/layer-range.ts";
import { type KvCells, QueuedEngine } from "../../src/engine/queued-engine.ts";
import type { DecodeBatch, DecodeOutputs, ModelFacts, SeqId } from "../../src/engine/range-engine.ts";
import type { Grammar, GrammarSpec } from "../../src/engine/range-engine.ts";

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

function fakeFacts(o: FakeEngineOptions): ModelFacts {
  const nLayer = o.nLayer ?? 4;
  const seamWidth = o.nEmbd ?? 8;
  if (seamWidth <= SALT) throw new Error("the fake engine needs n_embd > 3");
  return {
    arch: "llama",
    nLayer,
    seamWidth,
    nVocab: o.nVocab ?? 32,
    nCtxTrain: 4096,
    nHead: 1,
    nHeadKv: 1,
    nExpert: 0,
    range: layerRange(o.range?.start ?? 0, o.range?.end ?? nLayer, nLayer),
    weightBytes: 0,
  };
}

export class FakeEngine extends QueuedEngine {
  readonly kind: "native" | "wasm";
  readonly calls: FakeCall[] = [];
  readonly released: SeqId[] = [];
  /** prefixes copied from one sequence to another */
  readonly copies: { src: SeqId; dst: SeqId; pos: number }[] = [];
  readonly grammarTokens: number[] = [];
  /** KV cells of all sequences, and what one may hold */
  readonly #pool: number;
  readonly #perSequence: number;
  readonly #layout: KvCells["kvLayout"];
  /** engine calls so far: every batch is one graph pass */
  #passes = 0;
  #paused = false;
  #waiting: Array<() => void> = [];
  #callWaiters: Array<{ n: number; resolve: () => void }> = [];
  #failures: Array<(b: DecodeBatch) => EngineError | undefined> = [];

  constructor(o: FakeEngineOptions = {}) {
    const maxSequences = o.maxSequences ?? 8;
    super(o.backend ?? "fake", fakeFacts(o), o.recipe ?? new Uint8Array(32).fill(0x5e), {
      maxSequences,
      batchTokens: o.batchTokens ?? 512,
    });
    this.kind = o.kind ?? "wasm";
    this.#pool = o.kvCells ?? 256;
    this.#perSequence = o.streams ? Math.floor(this.#pool / maxSequences) : this.#pool;
    this.#layout = o.streams ? "streams" : "ordered";
  }

  /** Cells the open sequences hold: one per position each has committed. */
  get cellsUsed(): number {
    let n = 0;
    for (let s = 0; s < this.spec.maxSequences; s++) n += this.#cellsOf(s) ?? 0;
    return n;
  }

  get openSequences(): number {
    let n = 0;
    for (let s = 0; s < this.spec.maxSequences; s++) n += this.#cellsOf(s) === undefined ? 0 : 1;
    return n;
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

  // ---- what llama.cpp does below QueuedEngine ----

  /** Runs a batch QueuedEngine checked: recorded, held while paused, then refused or computed. */
  protected async compute(batch: DecodeBatch, accepted: () => void): Promise<DecodeOutputs> {
    this.calls.push({
      seq: [...batch.seq],
      pos: [...batch.pos],
      outputs: [...(batch.outputs ?? [])],
      tokens: batch.tokens ? [...batch.tokens] : this.#rowTokens(batch.hidden),
    });
    for (const w of this.#callWaiters.filter((w) => this.calls.length >= w.n)) w.resolve();
    this.#callWaiters = this.#callWaiters.filter((w) => this.calls.length < w.n);
    if (this.#paused) await new Promise<void>((go) => this.#waiting.push(go));
    for (const pick of this.#failures) {
      const e = pick(batch);
      if (e) throw e;
    }
    this.#checkRows(batch);
    this.#checkCells(batch);
    accepted();
    this.#passes++;
    return { ...this.#outputs(batch), passes: 1 };
  }

  protected freeCells(seq: SeqId): void {
    this.released.push(seq);
  }

  protected trimCells(): void {}

  protected copyCells(src: SeqId, dst: SeqId, pos: number): void {
    this.copies.push({ src, dst, pos });
  }

  /** The fake's state: its range and positions, 16 bytes a position (llama.cpp's grows so too). */
  protected override exportCells(seq: SeqId): Promise<Uint8Array> {
    const n = this.nextPosition(seq);
    const words = new Uint32Array(4 + 4 * n);
    words.set([FAKE_STATE, this.facts.range.start, this.facts.range.end, n]);
    return Promise.resolve(new Uint8Array(words.buffer));
  }

  /** Refuses another range's state, as llama.cpp refuses another layer count or width. */
  protected override importCells(_seq: SeqId, state: Uint8Array): Promise<number> {
    const w = new Uint32Array(state.slice().buffer, 0, Math.floor(state.length / 4));
    const { start, end } = this.facts.range;
    if (w[0] !== FAKE_STATE || w[1] !== start || w[2] !== end || state.length !== 16 + 16 * w[3]) {
      return Promise.reject(new EngineError("bad_input", "not a state of this engine's range"));
    }
    return Promise.resolve(w[3]);
  }

  protected kvCells(): KvCells {
    return {
      kvCells: this.#pool,
      kvCellsUsed: this.cellsUsed,
      kvBytes: this.cellsUsed * 64,
      kvCellsPerSequence: this.#perSequence,
      graphPasses: this.#passes,
      kvLayout: this.#layout,
      computeBytes: 0,
    };
  }

  protected free(): void {}

  // ---- the computation ----

  /** The positions an open sequence holds; undefined when it is not open. */
  #cellsOf(seq: number): number | undefined {
    try {
      return this.nextPosition(seq as SeqId);
    } catch {
      return undefined;
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
      if (cells > this.#perSequence) {
        throw new EngineError(
          "kv_full",
          `sequence ${s} needs ${cells} cells; it may hold ${this.#perSequence}`,
        );
      }
      total += cells - (this.#cellsOf(s) ?? 0);
    }
    if (total > this.#pool) throw new EngineError("kv_full", `${total} cells needed of ${this.#pool}`);
  }

  #outputs(b: DecodeBatch): DecodeOutputs {
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
