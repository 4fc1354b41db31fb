// The one interface every engine implements (native through FFI, WASM in a worker).
// Nothing above it knows which engine runs.
import type { LayerRange } from "./layer-range.ts";

/** An engine-local sequence slot: one per Route Session on this shard. */
export type SeqId = number & { readonly __brand: "SeqId" };

export interface ModelFacts {
  readonly arch: string;
  readonly nLayer: number;
  /** Floats in one hidden-state row at a seam: n_embd, or the whole residual stream where the
   *  architecture keeps more (deepseek4: hc_mult × n_embd). */
  readonly seamWidth: number;
  readonly nVocab: number;
  readonly nCtxTrain: number;
  readonly nHead: number;
  readonly nHeadKv: number;
  readonly nExpert: number;
  /** The layers this engine holds. */
  readonly range: LayerRange;
  /** Bytes of weights held (the shard's share, not the file). */
  readonly weightBytes: number;
}

export interface ShardSpec {
  readonly modelPath: string;
  readonly range: LayerRange | "whole";
  /** KV cells for all sequences (one cell = one token of one sequence). */
  readonly kvCells: number;
  readonly maxSequences: number;
  /** Most tokens one decode call may carry. */
  readonly batchTokens: number;
  readonly threads: number;
  /** Layers offloaded to a GPU backend (0 = CPU). */
  readonly gpuLayers?: number;
  /**
   * Batch-invariant decoding (the default): a sequence's outputs are bit-identical alone or
   * batched with any others: one ordered KV pool (any sequence may grow to kvCells), the
   * reference matmuls and attention over each sequence's own cells (docs/engine.md). Where the
   * pool cannot be kept ordered, each sequence holds kvCells / maxSequences cells of its own.
   * false: the pool in any order and the fastest kernels (batched matmuls, faster prefill on
   * CPUs with AMX).
   */
  readonly batchInvariant?: boolean;
  /**
   * The participant's memory cap: a range whose weights + KV + compute (memory-cap.ts) pass
   * it is refused from the header, before anything is read or allocated. 0 or absent: the
   * engine's own limit only (a WASM module's address space; none for native).
   */
  readonly memoryCapBytes?: number;
}

/** The context flags of the C API (strata.h) for a spec. */
export const CTX_CAPTURE = 1;
export const CTX_BATCH_INVARIANT = 2;
export function contextFlags(spec: ShardSpec, capture = false): number {
  return (capture ? CTX_CAPTURE : 0) | (spec.batchInvariant === false ? 0 : CTX_BATCH_INVARIANT);
}

/**
 * One mixed batch: token ids on the first shard, hidden states (n_tokens × the seam width, f32)
 * on the others; a sequence and a position per token. `outputs` marks the tokens whose
 * logits the last shard returns; other shards return every token's hidden state.
 */
export interface DecodeBatch {
  readonly tokens?: Int32Array;
  readonly hidden?: Float32Array;
  readonly seq: Int32Array;
  readonly pos: Int32Array;
  readonly outputs?: Uint8Array;
  /**
   * Where to write the outputs when it has room (the result's data is then a view of it): a
   * caller that steps every few milliseconds reuses its buffers instead of leaving the collector
   * a logits array a step. Engines that cannot write in place ignore it.
   */
  readonly into?: Float32Array;
}

/** Output rows in batch order: logits (n_vocab wide) or hidden states (n_embd wide). */
export interface DecodeOutputs {
  readonly rows: number;
  readonly dim: number;
  readonly data: Float32Array;
  /** graph passes the call took: 1 is the whole batch in one pass over the weights (absent:
   *  an engine that does not count them) */
  readonly passes?: number;
}

export interface EngineMemory {
  readonly weightBytes: number;
  readonly kvCells: number;
  readonly kvCellsUsed: number;
  readonly kvBytes: number;
  readonly sequencesOpen: number;
  readonly maxSequences: number;
  /** the cells one sequence may hold: the pool, or its own stream's share (layout "streams") */
  readonly kvCellsPerSequence: number;
  /** graph passes since the engine was made (0 where the engine does not count them) */
  readonly graphPasses: number;
  readonly kvLayout: KvLayout;
  /** the compute buffers the engine reserved for its largest batch (0 where it does not say) */
  readonly computeBytes: number;
}

/**
 * How the KV cache holds sequences: "shared", one pool in any order (not batch-invariant);
 * "ordered", one pool in which each sequence's cells stay in position order (batch-invariant,
 * any batch one pass); "streams", one stream of kvCells / maxSequences cells per sequence
 * (batch-invariant where the ordered pool cannot be kept; a batch splits into a pass per run of
 * consecutive sequence ids).
 */
export type KvLayout = "shared" | "ordered" | "streams";

export interface RangeEngine {
  readonly kind: "native" | "wasm";
  /** e.g. "cpu", "vulkan", "cuda", "webgpu". */
  readonly backend: string;
  /**
   * The recipe fingerprint (32 bytes, src/engine/recipe.ts): the engine binary and backend,
   * which decide the numerics. A session's seam frames must all come from one recipe.
   */
  readonly recipe: Uint8Array;
  readonly facts: ModelFacts;
  /** What decode() takes and returns on this shard. */
  readonly input: "tokens" | "hidden";
  readonly output: "logits" | "hidden";

  /** Claims a free sequence slot; EngineError kv_full when none is left. */
  openSequence(): SeqId;
  /** Frees the sequence's KV cells; other sequences are untouched. */
  releaseSequence(seq: SeqId): Promise<void>;
  /**
   * Forgets the sequence's positions from `pos` on (a repaired route takes back a step that
   * some of its hops ran); its next position becomes `pos`.
   */
  trimSequence(seq: SeqId, pos: number): Promise<void>;
  /**
   * `dst` (open) holds `src`'s first `pos` positions and nothing else, sharing their cells (a prefix
   * entry serving another session). Only where the engine can: `canCopySequences`.
   */
  copySequence?(src: SeqId, dst: SeqId, pos: number): Promise<void>;
  /** Whether copySequence works here: an ordered KV pool (one stream the sequences share). */
  canCopySequences?(): Promise<boolean>;
  /**
   * The sequence's KV as bytes (llama.cpp's per-sequence state for this shard's layers), to move
   * it to another engine of the same recipe and range. Where canCopySequences says yes.
   */
  exportSequence?(seq: SeqId): Promise<Uint8Array>;
  /**
   * `seq` (open, not decoding) holds what `exportSequence` gave, and goes on from its end: the
   * positions it now holds. Refused state leaves it empty at 0.
   */
  importSequence?(seq: SeqId, state: Uint8Array): Promise<number>;
  /** Next position the sequence expects. */
  nextPosition(seq: SeqId): number;
  decode(batch: DecodeBatch): Promise<DecodeOutputs>;
  /** KV and sequence counts, read in the engine's queue (never during a decode). */
  memory(): Promise<EngineMemory>;
  /**
   * llama.cpp's grammar sampler (GBNF, root rule "root") over this model's vocabulary, for the
   * shard that samples: EngineError bad_input when the text is no grammar.
   */
  grammar(spec: GrammarSpec): Promise<Grammar>;
  close(): Promise<void>;
}

/** A grammar as llama.cpp takes it: GBNF, lazy when it has triggers. */
export interface GrammarSpec {
  readonly gbnf: string;
  /** regexes over the text so far: the grammar applies from the first match on */
  readonly triggerPatterns?: readonly string[];
  /** tokens that start the grammar when sampled */
  readonly triggerTokens?: readonly number[];
}

/** One session's constraint on what it may sample next (llama.cpp's grammar state). */
export interface Grammar {
  /** Sets the logits of the tokens the grammar rejects next to -Infinity, in place. */
  mask(logits: Float32Array): Promise<void>;
  /** Advances past `token`: EngineError bad_input when the grammar does not allow it here. */
  accept(token: number): Promise<void>;
  close(): Promise<void>;
}
