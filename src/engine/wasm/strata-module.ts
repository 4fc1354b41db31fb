// What the emscripten module (built with -sWASM_BIGINT) exposes besides its exports, and
// views of its heap.
import type { CallableModule } from "./abi.ts";

export interface StrataModule extends CallableModule {
  HEAPU8: Uint8Array;
  /** the module's memory (pthread builds share it with their workers) */
  wasmMemory?: WebAssembly.Memory;
  /** the .wasm bytes it was instantiated from (the loader always hands them over) */
  wasmBinary?: Uint8Array;
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
export interface MemfsNode {
  usedBytes: number;
  stream_ops: Record<string, unknown>;
}

/**
 * A view of the whole heap. With shared memory a growth (on any thread) does not detach
 * old views: it leaves them short, so the view is renewed whenever the memory moved on.
 */
export function heap(m: StrataModule): Uint8Array {
  const buffer = m.wasmMemory?.buffer;
  if (buffer && m.HEAPU8.buffer !== buffer) return new Uint8Array(buffer);
  return m.HEAPU8;
}
