// RangeEngine on the WebAssembly build of the same fork and the same flat C API
// (vendor/llama.cpp/api/strata.h), for browsers, Deno and Node alike. The runtime hands
// over an instantiated module and the model's bytes; nothing here touches a file system
// of the host.
import { EngineError, type EngineErrorCode } from "../errors.ts";
import { layerRange } from "../layer-range.ts";
import {
  contextFlags,
  type DecodeBatch,
  type DecodeOutputs,
  type EngineMemory,
  type ModelFacts,
  type RangeEngine,
  type SeqId,
  type ShardSpec,
} from "../range-engine.ts";
import { SequenceTable } from "../sequences.ts";
import { EngineQueue } from "../engine-queue.ts";
import { type CallableModule, WasmAbi } from "./abi.ts";
import { presentBytes, readSparse, type SparseModel } from "../../artifact/sparse.ts";

/** What the emscripten module (built with -sWASM_BIGINT) exposes besides its exports. */
export interface StrataModule extends CallableModule {
  HEAPU8: Uint8Array;
  /** the module's memory (pthread builds share it with their workers) */
  wasmMemory?: WebAssembly.Memory;
  FS: {
    mkdirTree(path: string): void;
    writeFile(path: string, data: Uint8Array): void;
    unlink(path: string): void;
    lookupPath(path: string): { node: MemfsNode };
  };
  /** the WebGPU flavor's count of awaited GPU waits (buffer maps, queue done) */
  webgpuStats?: { mapWaits: number; workDoneWaits: number };
}

/** The parts of an emscripten MEMFS file node a sparse file replaces. */
interface MemfsNode {
  usedBytes: number;
  stream_ops: Record<string, unknown>;
}

/**
 * Puts the model where the loader opens it. A sparse model (a shard's download) becomes a
 * file of the artifact's length whose reads come from its spans, zeros elsewhere: the
 * range loader reads only the header and its own tensors, and nothing is copied twice.
 */
function placeModel(m: StrataModule, path: string, model: Uint8Array | SparseModel): void {
  if (model instanceof Uint8Array) return m.FS.writeFile(path, model);
  m.FS.writeFile(path, new Uint8Array(0));
  const node = m.FS.lookupPath(path).node;
  node.usedBytes = model.size;
  node.stream_ops = {
    ...node.stream_ops,
    read: (_s: unknown, buf: Uint8Array, offset: number, length: number, position: number) =>
      readSparse(model, new Uint8Array(buf.buffer, buf.byteOffset + offset, length), position, length),
    write: () => {
      throw new Error("a sparse model file is read-only");
    },
  };
}

const CODE: Record<number, EngineErrorCode> = { [-1]: "bad_input", [-2]: "kv_full", [-3]: "engine_failed" };

/** wasm32 addresses at most 4 GiB, and the engine needs room beyond the weights. */
export const WASM32_MEMORY_CAP = 4 * 2 ** 30;

/** How a module was built: wasm64 passes pointers as BigInt and has a larger cap. */
export interface WasmLoadOptions {
  /** the module's maximum memory (default: wasm32's 4 GiB) */
  memoryCap?: number;
  /** the WebGPU flavor: exports may suspend on GPU waits */
  suspends?: boolean;
  memory64?: boolean;
}

/**
 * pthread workers the build starts with each module (STRATA_WASM_MAX_THREADS): ggml
 * starts its threads on every graph, and a page's main thread cannot wait for a worker
 * that does not exist yet, so more threads than this are never asked for.
 */
export const WASM_MAX_THREADS = 4;

/**
 * A view of the whole heap. With shared memory a growth (on any thread) does not detach
 * old views: it leaves them short, so the view is renewed whenever the memory moved on.
 */
function heap(m: StrataModule): Uint8Array {
  const buffer = m.wasmMemory?.buffer;
  if (buffer && m.HEAPU8.buffer !== buffer) return new Uint8Array(buffer);
  return m.HEAPU8;
}

export class WasmEngine implements RangeEngine {
  readonly kind = "wasm" as const;
  readonly input: "tokens" | "hidden";
  readonly output: "logits" | "hidden";
  readonly #seqs: SequenceTable;
  readonly #calls = new EngineQueue();

  private constructor(
    private readonly m: StrataModule,
    private readonly abi: WasmAbi,
    private readonly model: number,
    private readonly ctx: number,
    readonly backend: string,
    readonly facts: ModelFacts,
    private readonly spec: ShardSpec,
  ) {
    this.input = facts.range.start === 0 ? "tokens" : "hidden";
    this.output = facts.range.end === facts.nLayer ? "logits" : "hidden";
    this.#seqs = new SequenceTable(spec.maxSequences);
  }

  /**
   * Loads a range from the model's bytes (whole, or a shard's sparse download), placed in
   * the module's in-memory file system (outside the wasm heap). Refuses before allocating
   * when those bytes alone pass the cap.
   */
  static async load(
    m: StrataModule,
    file: Uint8Array | SparseModel,
    spec: ShardSpec,
    o: WasmLoadOptions = {},
  ): Promise<WasmEngine> {
    // what the heap must take in: the whole file, or a shard's present spans
    const heapBytes = file instanceof Uint8Array ? file.length : presentBytes(file);
    const memoryCap = o.memoryCap ?? WASM32_MEMORY_CAP;
    const abi = new WasmAbi(m, o.memory64 ?? false, o.suspends ?? false);
    if (heapBytes >= memoryCap) {
      throw new EngineError(
        "load_failed",
        `a ${(heapBytes / 2 ** 30).toFixed(2)} GiB model file passes this engine's ${
          memoryCap / 2 ** 30
        } GiB memory`,
      );
    }
    if (spec.threads < 1 || spec.threads > WASM_MAX_THREADS) {
      throw new EngineError(
        "bad_input",
        `the WASM engine runs 1 to ${WASM_MAX_THREADS} threads, not ${spec.threads}`,
      );
    }
    const path = `/models/${spec.modelPath.split("/").pop() || "model.gguf"}`;
    m.FS.mkdirTree("/models");
    placeModel(m, path, file);
    const [start, end] = spec.range === "whole" ? [0, 0] : [spec.range.start, spec.range.end];
    const gpuLayers = spec.gpuLayers ?? 0;
    const load = await withErrorBuffer(
      m,
      abi,
      (err, cap) =>
        withString(m, abi, path, (p) => abi.call("strata_model_load", p, start, end, gpuLayers, 0, err, cap)),
    );
    m.FS.unlink(path); // the loader has read what the range needs
    const model = load.result;
    if (!model) {
      const message = load.message;
      throw new EngineError(message.startsWith("invalid layer range") ? "bad_range" : "load_failed", message);
    }
    const facts = modelFacts(m, abi, model);
    const made = await withErrorBuffer(m, abi, (err, cap) =>
      abi.call(
        "strata_ctx_new",
        model,
        spec.kvCells,
        spec.maxSequences,
        spec.batchTokens,
        spec.threads,
        contextFlags(spec),
        err,
        cap,
      ));
    const ctx = made.result;
    if (!ctx) {
      const message = made.message;
      await abi.call("strata_model_free", model);
      throw new EngineError(message.startsWith("context:") ? "bad_input" : "engine_failed", message);
    }
    return new WasmEngine(m, abi, model, ctx, gpuLayers > 0 ? "wasm-webgpu" : "wasm-cpu", facts, spec);
  }

  openSequence(): SeqId {
    return this.#seqs.open();
  }

  nextPosition(seq: SeqId): number {
    return this.#seqs.nextPosition(seq);
  }

  releaseSequence(seq: SeqId): Promise<void> {
    return this.#calls.run(() => {
      this.#seqs.release(seq);
      this.#check(this.abi.now("strata_seq_release", this.ctx, seq));
    });
  }

  /** Awaited GPU waits so far (WebGPU flavor): a benchmark divides them by decode steps. */
  gpuWaits(): number | undefined {
    const s = this.m.webgpuStats;
    return s ? s.mapWaits + s.workDoneWaits : undefined;
  }

  decode(batch: DecodeBatch): Promise<DecodeOutputs> {
    return this.#calls.run(async () => {
      this.#seqs.check(batch, this.facts, this.input, this.spec.batchTokens);
      const n = batch.seq.length;
      const m = this.m;
      const abi = this.abi;
      const put = (a: Int32Array | Float32Array | Uint8Array | undefined) => {
        if (!a) return 0;
        const p = abi.now("malloc", Math.max(1, a.byteLength));
        heap(m).set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), p);
        return p;
      };
      const arrays = [batch.tokens, batch.hidden, batch.pos, batch.seq, batch.outputs];
      const ptrs = arrays.map(put);
      try {
        // each array with its element count
        const args = arrays.flatMap((a, i) => [ptrs[i], a?.length ?? 0]);
        const rows = this.#check(await abi.call("strata_decode", this.ctx, n, ...args));
        this.#seqs.commit(batch);
        const dim = abi.now("strata_output_dim", this.ctx);
        const data = new Float32Array(rows * dim);
        if (rows > 0) {
          const dst = abi.now("malloc", data.byteLength);
          try {
            this.#check(await abi.call("strata_outputs", this.ctx, dst, data.length));
            new Uint8Array(data.buffer).set(heap(m).subarray(dst, dst + data.byteLength));
          } finally {
            abi.now("free", dst);
          }
        }
        return { rows, dim, data };
      } finally {
        for (const p of ptrs) if (p) abi.now("free", p);
      }
    });
  }

  /** Read in the engine's queue: never while a decode changes the KV cache. */
  memory(): Promise<EngineMemory> {
    return this.#calls.run(() => {
      const p = this.abi.now("malloc", 40);
      try {
        this.#check(this.abi.now("strata_ctx_stats", this.ctx, p, 5));
        const s = new BigInt64Array(heap(this.m).slice(p, p + 40).buffer);
        return {
          weightBytes: this.facts.weightBytes,
          kvCells: Number(s[0]),
          kvCellsUsed: Number(s[1]),
          kvBytes: Number(s[2]),
          sequencesOpen: this.#seqs.openCount,
          maxSequences: this.spec.maxSequences,
          kvCellsPerSequence: Number(s[4]),
        };
      } finally {
        this.abi.now("free", p);
      }
    });
  }

  close(): Promise<void> {
    return this.#calls.close(async () => {
      await this.abi.call("strata_ctx_free", this.ctx);
      await this.abi.call("strata_model_free", this.model);
    });
  }

  #check(code: number): number {
    if (code >= 0) return code;
    throw new EngineError(
      CODE[code] ?? "engine_failed",
      readString(this.m, this.abi, (b, c) => this.abi.now("strata_ctx_error", this.ctx, b, c)) ||
        "unknown engine error",
    );
  }
}

async function withString<T>(
  m: StrataModule,
  abi: WasmAbi,
  s: string,
  fn: (p: number) => Promise<T>,
): Promise<T> {
  const bytes = new TextEncoder().encode(s + "\0");
  const p = abi.now("malloc", bytes.length);
  heap(m).set(bytes, p);
  try {
    return await fn(p);
  } finally {
    abi.now("free", p);
  }
}

function readString(m: StrataModule, abi: WasmAbi, fill: (buf: number, cap: number) => number): string {
  const cap = 4096;
  const p = abi.now("malloc", cap);
  try {
    const n = fill(p, cap);
    return n > 0 ? new TextDecoder().decode(heap(m).slice(p, p + Math.min(n, cap - 1))) : "";
  } finally {
    abi.now("free", p);
  }
}

/** Calls fn with an error buffer in the heap (calls without a handle report there). */
async function withErrorBuffer(
  m: StrataModule,
  abi: WasmAbi,
  fn: (err: number, cap: number) => Promise<number>,
): Promise<{ result: number; message: string }> {
  const cap = 2048;
  const p = abi.now("malloc", cap);
  heap(m)[p] = 0;
  try {
    const result = await fn(p, cap);
    const h = heap(m);
    const end = h.indexOf(0, p);
    const message = new TextDecoder().decode(h.slice(p, end < 0 ? p + cap : end));
    return { result, message: message || "unknown engine error" };
  } finally {
    abi.now("free", p);
  }
}

function modelFacts(m: StrataModule, abi: WasmAbi, model: number): ModelFacts {
  const p = abi.now("malloc", 80);
  let f: BigInt64Array;
  try {
    abi.now("strata_model_facts", model, p, 10);
    f = new BigInt64Array(heap(m).slice(p, p + 80).buffer);
  } finally {
    abi.now("free", p);
  }
  const n = (i: number) => Number(f[i]);
  return {
    arch: readString(m, abi, (b, c) => abi.now("strata_model_arch", model, b, c)),
    nLayer: n(0),
    nEmbd: n(1),
    nVocab: n(2),
    nCtxTrain: n(3),
    range: layerRange(n(4), n(5), n(0)),
    nHead: n(6),
    nHeadKv: n(7),
    weightBytes: n(8),
    nExpert: n(9),
  };
}
