// One engine call at a time on a context: later calls queue behind earlier ones, and none
// runs once the engine is closed. Both engines (native and WASM) hold one.
import { EngineError } from "./errors.ts";

export class EngineQueue {
  #tail: Promise<unknown> = Promise.resolve();
  #closed = false;
  #closing?: Promise<void>;

  run<T>(fn: () => T | Promise<T>): Promise<T> {
    const next = this.#tail.then(() => {
      if (this.#closed) throw new EngineError("engine_failed", "engine is closed");
      return fn();
    });
    this.#tail = next.catch(() => {});
    return next;
  }

  /** Runs `free` once, after everything queued; later calls are refused, closing again is a no-op. */
  close(free: () => void | Promise<void>): Promise<void> {
    this.#closing ??= this.run(async () => {
      this.#closed = true;
      await free();
    });
    return this.#closing;
  }
}
