// The engine thread's side of the messages to an engine worker: requests with their
// answers, the worker's requests for the engine's files, and a worker that died.
import { EngineError } from "../errors.ts";
import type { WasmFiles } from "./wasm-files.ts";
import {
  buffersOf,
  type EngineWorker,
  type FilesReply,
  type FilesRequest,
  fromWire,
  type WorkerReply,
  type WorkerRequest,
} from "./worker-protocol.ts";

type Pending = { resolve: (v: unknown) => void; reject: (e: unknown) => void };
type Unsent<T> = T extends unknown ? Omit<T, "id"> : never;

export class WorkerLink {
  #next = 0;
  readonly #pending = new Map<number, Pending>();
  /** why nothing more can be asked: the worker died, or an answer nobody awaited failed */
  #failed?: EngineError;
  /** the WebGPU flavor's GPU waits, as of the last answer */
  gpuWaits?: number;

  constructor(
    private readonly port: EngineWorker,
    private readonly files: WasmFiles,
  ) {
    port.onmessage = (e) => {
      const msg = e.data as WorkerReply | FilesRequest;
      if ("files" in msg) void this.#sendFiles(msg);
      else this.#answer(msg);
    };
    port.onerror = (e) => {
      e.preventDefault(); // the engine fails, not the process
      const why = e.message || "unknown error";
      this.#fail(new EngineError("engine_failed", `the engine's worker failed: ${why}`));
    };
  }

  request(msg: Unsent<WorkerRequest>, transfer: Transferable[] = []): Promise<unknown> {
    if (this.#failed) return Promise.reject(this.#failed);
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      try {
        this.port.postMessage({ ...msg, id }, transfer);
      } catch (err) {
        // what cannot be cloned never reached the worker
        this.#pending.delete(id);
        reject(new EngineError("bad_input", `cannot send ${msg.op} to the engine's worker: ${err}`));
      }
    });
  }

  /** A request whose answer nobody awaits: its failure fails every later one. */
  send(msg: Unsent<WorkerRequest>): void {
    this.request(msg).catch((e: EngineError) => this.#fail(e));
  }

  terminate(): void {
    this.port.terminate();
    this.#fail(new EngineError("engine_failed", "engine is closed"));
  }

  #answer(r: WorkerReply): void {
    const p = this.#pending.get(r.id);
    if (!p) return;
    this.#pending.delete(r.id);
    if ("error" in r) return p.reject(fromWire(r.error));
    this.gpuWaits = r.gpuWaits;
    p.resolve(r.ok);
  }

  async #sendFiles(q: FilesRequest): Promise<void> {
    let reply: FilesReply;
    try {
      reply = { files: q.files, ok: await this.files.files(q.flavor) };
    } catch (err) {
      reply = { files: q.files, error: err instanceof Error ? err.message : String(err) };
    }
    this.port.postMessage(reply, "ok" in reply ? buffersOf([reply.ok.wasm]) : []);
  }

  #fail(err: EngineError): void {
    this.#failed ??= err;
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }
}
