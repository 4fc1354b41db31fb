// The WASM engine in a worker of its own, so that it never computes on the thread that
// carries seams (a tab's page, a Deno node's event loop): a RangeEngine that checks
// batches here and posts them to the worker (engine-worker.ts), which owns the module and
// a WasmEngine. Runtime-agnostic: it takes a started Worker and the host's engine files.
import type { SparseModel } from "../../artifact/sparse.ts";
import { type KvCells, QueuedEngine } from "../queued-engine.ts";
import type {
  DecodeBatch,
  DecodeOutputs,
  EngineMemory,
  Grammar,
  GrammarSpec,
  SeqId,
  ShardSpec,
} from "../range-engine.ts";
import type { LoadedWasm, WasmEngineRequest } from "./load-engine.ts";
import type { WasmFiles } from "./wasm-files.ts";
import { WorkerLink } from "./worker-link.ts";
import { buffersOf, type EngineWorker, type WorkerLoaded } from "./worker-protocol.ts";

const modelBuffers = (m: Uint8Array | SparseModel) =>
  buffersOf(m instanceof Uint8Array ? [m] : m.spans.map((s) => s.bytes));

export class WorkerEngine extends QueuedEngine {
  readonly kind = "wasm" as const;

  /**
   * Loads the request's range in the worker (the one loader, engine-worker.ts). The model's
   * buffers move to the worker: the caller's views of them are left empty.
   */
  static async start(
    worker: EngineWorker,
    files: WasmFiles,
    r: WasmEngineRequest,
  ): Promise<LoadedWasm<WorkerEngine>> {
    const link = new WorkerLink(worker, files);
    try {
      const loaded = await link.request({ op: "load", request: r }, modelBuffers(r.model)) as WorkerLoaded;
      return { engine: new WorkerEngine(link, loaded, r.spec), fallback: loaded.fallback };
    } catch (err) {
      link.terminate();
      throw err;
    }
  }

  private constructor(private readonly link: WorkerLink, loaded: WorkerLoaded, spec: ShardSpec) {
    super(loaded.backend, loaded.facts, loaded.recipe, spec);
  }

  /** Awaited GPU waits so far (WebGPU flavor), as of the last answer. */
  gpuWaits(): number | undefined {
    return this.link.gpuWaits;
  }

  // the worker's engine claims the same slot: both tables see the same opens and releases in order
  protected override opened(seq: SeqId): void {
    this.link.send({ op: "open", seq });
  }

  protected async compute(batch: DecodeBatch, accepted: () => void): Promise<DecodeOutputs> {
    // copied, not moved: the caller may still read its arrays
    const out = await this.link.request({ op: "decode", batch }) as DecodeOutputs;
    accepted();
    return out;
  }

  protected async freeCells(seq: SeqId): Promise<void> {
    await this.link.request({ op: "release", seq });
  }

  protected async trimCells(seq: SeqId, pos: number): Promise<void> {
    await this.link.request({ op: "trim", seq, pos });
  }

  protected async copyCells(src: SeqId, dst: SeqId, pos: number): Promise<void> {
    await this.link.request({ op: "copy", src, dst, pos });
  }

  protected override async exportCells(seq: SeqId): Promise<Uint8Array> {
    return await this.link.request({ op: "export", seq }) as Uint8Array;
  }

  protected override async importCells(seq: SeqId, state: Uint8Array): Promise<number> {
    // a copy crosses: the caller keeps its bytes
    return await this.link.request({ op: "import", seq, state }) as number;
  }

  protected async kvCells(): Promise<KvCells> {
    return await this.link.request({ op: "memory" }) as EngineMemory;
  }

  async grammar(spec: GrammarSpec): Promise<Grammar> {
    const id = await this.link.request({ op: "grammar", spec }) as number;
    const link = this.link;
    return {
      async mask(logits: Float32Array) {
        // the worker masks a copy (the caller's array may be a view it still reads), copied back
        const copy = logits.slice();
        const out = await link.request({ op: "grammar_mask", grammar: id, logits: copy }, [
          copy.buffer,
        ]) as Float32Array;
        logits.set(out);
      },
      async accept(token: number) {
        await link.request({ op: "grammar_accept", grammar: id, token });
      },
      async close() {
        await link.request({ op: "grammar_close", grammar: id });
      },
    };
  }

  protected async free(): Promise<void> {
    try {
      await this.link.request({ op: "close" });
    } finally {
      this.link.terminate();
    }
  }
}
