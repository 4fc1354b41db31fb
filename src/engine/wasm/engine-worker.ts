// The worker side of WorkerEngine: owns one emscripten module and its WasmEngine (the
// module's pthread workers start from here), answers requests one at a time in order, and
// asks its host for the engine's files. A runtime's worker entry calls serveEngineWorker
// (server/engine/wasm/engine-worker.ts under Deno, web/host/engine-worker.ts in pages).
import { EngineError } from "../errors.ts";
import type { Grammar, SeqId } from "../range-engine.ts";
import { loadWasmEngineFrom } from "./load-engine.ts";
import type { WasmFiles, WasmModuleFiles } from "./wasm-files.ts";
import type { WasmEngine } from "./wasm-engine.ts";
import {
  type EnginePort,
  type FilesReply,
  toWire,
  type WorkerLoaded,
  type WorkerRequest,
} from "./worker-protocol.ts";

export function serveEngineWorker(scope: EnginePort): void {
  let engine: WasmEngine | undefined;
  const need = () => {
    if (!engine) throw new EngineError("engine_failed", "no shard loaded in this worker");
    return engine;
  };

  const grammars = new Map<number, Grammar>();
  let nextGrammar = 1;
  const grammar = (id: number) => {
    const g = grammars.get(id);
    if (!g) throw new EngineError("bad_input", `no grammar ${id} in this worker`);
    return g;
  };

  let nextFiles = 0;
  const filesAsked = new Map<number, { resolve: (f: WasmModuleFiles) => void; reject: (e: Error) => void }>();
  const host: WasmFiles = {
    files: (flavor) =>
      new Promise((resolve, reject) => {
        const id = nextFiles++;
        filesAsked.set(id, { resolve, reject });
        scope.postMessage({ files: id, flavor }, []);
      }),
  };

  /** One request's answer, and the buffers it moves back. */
  async function handle(q: WorkerRequest): Promise<[unknown, Transferable[]]> {
    switch (q.op) {
      case "load": {
        const { engine: e, fallback } = await loadWasmEngineFrom(host, q.request);
        engine = e;
        const loaded: WorkerLoaded = { facts: e.facts, backend: e.backend, recipe: e.recipe, fallback };
        return [loaded, []];
      }
      case "open": {
        const seq = need().openSequence();
        if (seq !== q.seq) throw new EngineError("engine_failed", `slot ${seq} opened where ${q.seq} was`);
        return [seq, []];
      }
      case "decode": {
        const out = await need().decode(q.batch);
        return [out, [out.data.buffer]];
      }
      case "release":
        return [await need().releaseSequence(q.seq as SeqId), []];
      case "trim":
        return [await need().trimSequence(q.seq as SeqId, q.pos), []];
      case "copy":
        return [await need().copySequence!(q.src as SeqId, q.dst as SeqId, q.pos), []];
      case "export": {
        const state = await need().exportSequence!(q.seq as SeqId);
        return [state, [state.buffer]];
      }
      case "import":
        return [await need().importSequence!(q.seq as SeqId, q.state), []];
      case "memory":
        return [await need().memory(), []];
      case "grammar": {
        const id = nextGrammar++;
        grammars.set(id, await need().grammar(q.spec));
        return [id, []];
      }
      case "grammar_mask":
        await grammar(q.grammar).mask(q.logits);
        return [q.logits, [q.logits.buffer]];
      case "grammar_accept":
        return [await grammar(q.grammar).accept(q.token), []];
      case "grammar_close":
        await grammars.get(q.grammar)?.close();
        grammars.delete(q.grammar);
        return [undefined, []];
      case "close":
        for (const g of grammars.values()) await g.close();
        grammars.clear();
        await engine?.close();
        engine = undefined;
        return [undefined, []];
    }
  }

  let chain = Promise.resolve();
  scope.onmessage = (e) => {
    const msg = e.data as WorkerRequest | FilesReply;
    if ("files" in msg) {
      const asked = filesAsked.get(msg.files);
      filesAsked.delete(msg.files);
      if ("ok" in msg) asked?.resolve(msg.ok);
      else asked?.reject(new Error(msg.error));
      return;
    }
    // in order: the engine's slots follow the same opens and releases as its host's
    chain = chain.then(async () => {
      try {
        const [ok, transfer] = await handle(msg);
        scope.postMessage({ id: msg.id, ok, gpuWaits: engine?.gpuWaits() }, transfer);
      } catch (err) {
        scope.postMessage({ id: msg.id, error: toWire(err) }, []);
      }
    });
  };
}
