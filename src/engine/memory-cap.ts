// Whether a layer range fits a participant's memory cap: its weights, its KV budget and the
// compute buffers of its decode graph, decided from the model's header before anything is
// loaded (an engine refuses its range before it reads a weight; the tracker checks every
// advert; a volunteer page checks before it downloads). docs/engine.md compares the compute
// estimate with what llama.cpp allocates.
import { type GraphShape, graphShape, headerGraphShape } from "../gguf/graph-shape.ts";
import { type KvLayer, kvShape, uniformKv } from "../gguf/kv-shape.ts";
import { buildManifest, type Manifest, shardBytes } from "../gguf/manifest.ts";
import type { GgufHeader } from "../gguf/reader.ts";
import { EngineError } from "./errors.ts";
import type { ShardSpec } from "./range-engine.ts";

const GIB = 2 ** 30, MIB = 2 ** 20;

export interface RangeMemory {
  readonly weightBytes: number;
  readonly kvBytes: number;
  /** the decode graph's buffers at their worst case and the outputs buffer */
  readonly computeBytes: number;
  readonly total: number;
}

/** llama.cpp rounds the context, and each sequence's own stream, up to 256 cells. */
const KV_PAD = 256;
const padTo = (n: number, to: number) => Math.ceil(n / to) * to;

/** The cells llama.cpp allocates for a pool of kvCells: one stream, or one for each sequence. */
export function kvCellsAllocated(kvCells: number, streams = 1): number {
  const nCtx = padTo(kvCells, KV_PAD);
  return streams > 1 ? padTo(Math.floor(nCtx / streams), KV_PAD) * streams : nCtx;
}

/**
 * KV streams a batch-invariant engine makes for these layers (strata.h): one ordered pool for
 * llama.cpp's plain and sliding-window caches under fused attention, one stream per sequence
 * where the pool cannot be kept in order: unfused attention, or caches of other kinds
 * (deepseek4's per-sequence streams, the indexer caches of glm-dsa and deepseek32). A pool
 * that is not batch-invariant is one stream.
 */
export function kvStreams(
  b: Pick<EngineBudget, "batchInvariant" | "maxSequences" | "flashAttention">,
  kv: readonly KvLayer[],
): number {
  const ordered = b.flashAttention && kv.every((l) => l.streams !== "per-sequence" && !l.indexer);
  return b.batchInvariant && !ordered ? Math.max(1, b.maxSequences) : 1;
}

/** K and V in f16 for every layer of the range (kv: the range's layers) and every cell of the
 *  pool; plus compute. Sliding-window layers hold the whole pool too: engines keep full-size
 *  caches (strata_ctx_new), so a repair can trim a sequence back exactly. */
export function rangeMemory(o: {
  weightBytes: number;
  kv: readonly KvLayer[];
  kvCells: number;
  /** KV streams: one per sequence when batch-invariant (default 1) */
  streams?: number;
  /** sequences the context holds (default: streams) */
  sequences?: number;
  computeBytes?: number;
}): RangeMemory {
  const streams = o.streams ?? 1;
  const sequences = Math.max(streams, o.sequences ?? streams);
  const kvBytes = o.kv.reduce((n, l) => n + layerKvBytes(l, o.kvCells, streams, sequences), 0);
  const computeBytes = o.computeBytes ?? 0;
  return { weightBytes: o.weightBytes, kvBytes, computeBytes, total: o.weightBytes + kvBytes + computeBytes };
}

/** One layer's cache. A per-sequence cache (deepseek4) has a stream for every sequence, each
 *  of a batch-invariant stream's cells, or of the whole pool's in a shared pool; each of its
 *  compressed caches rounds a stream's rows up as llama.cpp rounds a context. */
function layerKvBytes(l: KvLayer, kvCells: number, streams: number, sequences: number): number {
  const width = l.k + l.v + (l.indexer ?? 0);
  if (l.streams !== "per-sequence") return kvCellsAllocated(kvCells, streams) * width * 2;
  const perStream = kvCellsAllocated(kvCells, streams) / streams;
  const compressed = (l.compressed ?? []).reduce(
    (n, c) => n + padTo(Math.max(1, Math.ceil(perStream / c.ratio)), KV_PAD) * c.k * 2,
    0,
  );
  return sequences * (perStream * width * 2 + compressed + (l.stateBytes ?? 0));
}

/** The engine settings the estimate depends on: a ShardSpec's, or what a node advertises. */
export interface EngineBudget {
  readonly kvCells: number;
  readonly maxSequences: number;
  /** tokens of one engine call: llama.cpp reserves its graph for a ubatch this large */
  readonly batchTokens: number;
  /** batch-invariant decoding: one ordered pool, or a KV stream per sequence where the
   *  cache cannot keep one (kvStreams) */
  readonly batchInvariant: boolean;
  /**
   * attention runs fused (ggml's FLASH_ATTN_EXT, which llama.cpp picks on the CPU backends):
   * no n_head × n_kv score matrix. Otherwise the estimate counts one, as an upper bound.
   */
  readonly flashAttention: boolean;
}

export function specBudget(
  spec: Pick<ShardSpec, "kvCells" | "maxSequences" | "batchTokens" | "batchInvariant">,
  flashAttention: boolean,
): EngineBudget {
  const { kvCells, maxSequences, batchTokens } = spec;
  return {
    kvCells,
    maxSequences,
    batchTokens,
    batchInvariant: spec.batchInvariant !== false,
    flashAttention,
  };
}

/**
 * An upper bound of what llama.cpp's scheduler allocates for the range's worst-case graph
 * (a ubatch of batchTokens tokens over the full KV pool), plus its outputs buffer: the
 * activations one layer holds live at once, or the head's logits of every token, whichever
 * is larger (the allocator reuses the layers' memory for the head).
 */
export function computeBytes(
  g: GraphShape,
  at: { readonly first: boolean; readonly last: boolean },
  b: EngineBudget,
  /** KV streams (kvStreams): each token sees its own stream's cells, or the whole pool */
  streams = 1,
): number {
  const f32 = 4;
  const cells = kvCellsAllocated(b.kvCells, streams);
  const t = Math.min(b.batchTokens, cells);
  // residual, normed input, attention out, FFN input; Q, K, V; FFN gate, up and activation
  const layer = f32 * t * (4 * g.nEmbd + g.nEmbdQ + g.nEmbdKv2 + 3 * g.nFf);
  // each token sees its stream's cells: the mask (f16 when fused), or every head's scores too
  const perStream = cells / streams;
  const attention = b.flashAttention ? 2 * perStream * t : f32 * perStream * t * (g.nHead + 1);
  const input = at.first ? f32 * t * g.nEmbd : 0;
  const head = at.last ? f32 * t * (g.nVocab + 2 * g.nEmbd) : 0;
  // outputs: every token's hidden state, or the logits of one token per sequence
  const outputs = f32 * (at.last ? Math.min(t, b.maxSequences) * g.nVocab : t * g.nEmbd);
  return input + Math.max(layer + attention, head) + outputs;
}

/** The model facts a range's memory comes from; `graph` defaults to the manifest's shapes. */
export interface RangeModel {
  readonly manifest: Manifest;
  /** each trunk layer's KV cache */
  readonly kv: readonly KvLayer[];
  readonly graph?: GraphShape;
}

/** Weights, KV and compute of [start, end); without a budget, compute is not counted. */
export function shardMemory(
  model: RangeModel,
  range: { readonly start: number; readonly end: number },
  kvCells: number,
  budget?: Omit<EngineBudget, "kvCells">,
): RangeMemory {
  const m = model.manifest;
  const kv = model.kv.slice(range.start, range.end === m.nLayer ? undefined : range.end);
  const streams = budget ? kvStreams(budget, kv) : 1;
  const at = { first: range.start === 0, last: range.end === m.nLayer };
  return rangeMemory({
    weightBytes: shardBytes(m, range.start, range.end).bytes,
    // the last range holds the caches of layers after the trunk too
    kv,
    kvCells,
    streams,
    sequences: budget?.maxSequences,
    computeBytes: budget
      ? computeBytes(model.graph ?? graphShape(m.tensors), at, { ...budget, kvCells }, streams)
      : 0,
  });
}

/** The estimate never reads the artifact's name: a header read from a file has none yet. */
const UNNAMED = "0".repeat(64);

/** A model file's facts from its header (read before anything else of the file). */
export function headerModel(header: GgufHeader, fileSize: number): RangeModel {
  return {
    manifest: buildManifest(header, fileSize, UNNAMED),
    kv: kvShape(header).layers,
    graph: headerGraphShape(header),
  };
}

/** An artifact's facts from its manifest alone (before a download): the KV layout its header
 *  gave it, or, for a manifest without one, K's width from its shape in every layer. */
export function manifestModel(manifest: Manifest): RangeModel {
  const graph = graphShape(manifest.tensors);
  if (manifest.kv) return { manifest, kv: manifest.kv, graph };
  const k = manifest.tensors.find((t) => t.name === "blk.0.attn_k.weight");
  return { manifest, kv: uniformKv(manifest.nLayer, k?.shape[1] ?? graph.nEmbdKv2 / 2), graph };
}

/** What of a ShardSpec the estimate reads. */
export type SpecBudget = Pick<
  ShardSpec,
  "range" | "kvCells" | "maxSequences" | "batchTokens" | "batchInvariant"
>;

/** What loading spec's range of the model takes. */
export function specMemory(model: RangeModel, spec: SpecBudget, flashAttention: boolean): RangeMemory {
  const range = spec.range === "whole" ? { start: 0, end: model.manifest.nLayer } : spec.range;
  return shardMemory(model, range, spec.kvCells, specBudget(spec, flashAttention));
}

/** What a node's default KV pool gives each session it may hold at once, on average. */
export const DEFAULT_POOL_CELLS_PER_SESSION = 4096;
/** The default pool never starts smaller than this, nor halves below MIN_DEFAULT_POOL. */
const START_DEFAULT_POOL = 8192, MIN_DEFAULT_POOL = 1024;

/**
 * A node's KV pool when it was not given one (--kv-cells): room for every session it admits to
 * hold DEFAULT_POOL_CELLS_PER_SESSION tokens at once, halved until the range's weights, KV and
 * compute fit the memory cap (0: no cap). Where even the smallest does not fit, the smallest:
 * the cap check then says what is missing.
 */
export function defaultPool(
  model: RangeModel,
  spec: Omit<SpecBudget, "kvCells">,
  o: { readonly capBytes: number; readonly flashAttention: boolean },
): number {
  let cells = Math.max(START_DEFAULT_POOL, spec.maxSequences * DEFAULT_POOL_CELLS_PER_SESSION);
  while (
    cells > MIN_DEFAULT_POOL &&
    memoryMisfit(specMemory(model, { ...spec, kvCells: cells }, o.flashAttention), o.capBytes)
  ) {
    cells = Math.max(MIN_DEFAULT_POOL, padTo(Math.floor(cells / 2), KV_PAD));
  }
  return cells;
}

/** Why the range does not fit under the cap (0 = no cap), or undefined when it does. */
export function memoryMisfit(need: RangeMemory, capBytes: number): string | undefined {
  if (capBytes <= 0 || need.total <= capBytes) return undefined;
  // one unit for every number, so they compare at a glance
  const [unit, name, digits] = capBytes >= GIB
    ? [GIB, "GiB", 2]
    : capBytes >= MIB
    ? [MIB, "MiB", 1]
    : [1024, "KiB", 1];
  const size = (n: number) => `${(n / unit).toFixed(digits)} ${name}`;
  return `need ${size(need.total)} (weights ${size(need.weightBytes)} + KV ${size(need.kvBytes)} + ` +
    `compute ${size(need.computeBytes)}), more than the memory cap of ${size(capBytes)}`;
}

/**
 * Refuses (EngineError over_memory_cap) a spec whose range passes capBytes (0: no cap), from
 * the header (or manifest) alone: nothing of the weights has been read or allocated yet.
 * Returns what it takes (undefined when there is no cap to check).
 */
export function checkMemoryCap(
  model: RangeModel,
  spec: SpecBudget,
  o: { readonly capBytes: number; readonly flashAttention: boolean },
): RangeMemory | undefined {
  const r = spec.range === "whole" ? { start: 0, end: model.manifest.nLayer } : spec.range;
  // a range the model lacks is the loader's to refuse (bad_range)
  if (o.capBytes <= 0 || !(r.start >= 0 && r.start < r.end && r.end <= model.manifest.nLayer)) {
    return undefined;
  }
  const need = specMemory(model, spec, o.flashAttention);
  const misfit = memoryMisfit(need, o.capBytes);
  if (misfit) {
    throw new EngineError("over_memory_cap", `layers ${r.start}:${r.end} ${misfit}`);
  }
  return need;
}

const UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  k: 2 ** 10,
  kib: 2 ** 10,
  m: 2 ** 20,
  mib: 2 ** 20,
  g: 2 ** 30,
  gib: 2 ** 30,
  t: 2 ** 40,
  tib: 2 ** 40,
};

/**
 * A memory size: "512MB", "1.5GiB", "2G", "4096" (bytes). KB/MB/GB/TB are decimal (10^3…),
 * KiB/MiB/GiB/TiB binary (2^10…), and a bare K/M/G/T binary too; units in any case.
 */
export function parseMemorySize(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m ? UNITS[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined) {
    throw new RangeError(`"${text}" is not a memory size (e.g. 512MB, 1.5GiB, 2G)`);
  }
  const bytes = Math.floor(Number(m[1]) * unit);
  if (bytes <= 0) throw new RangeError(`a memory size must be more than 0 bytes, not "${text}"`);
  return bytes;
}
