// A push-driven async iterable: producers push without waiting, one consumer pulls in
// order. Streams (gRPC request bodies, relay channels, reply pumps) are built on it.

export class AsyncQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #waiting: ((r: IteratorResult<T>) => void) | undefined;
  #failWaiting: ((e: unknown) => void) | undefined;
  #ended = false;
  #error: unknown;
  #failed = false;

  /** `onTake`: called as each item goes to the consumer (a producer counting what waits). */
  constructor(private readonly onTake?: (item: T) => void) {}

  get ended(): boolean {
    return this.#ended || this.#failed;
  }

  /** Adds an item; false when the queue has ended (the item is dropped). */
  push(item: T): boolean {
    if (this.ended) return false;
    if (this.#waiting) {
      const w = this.#waiting;
      this.#waiting = this.#failWaiting = undefined;
      this.onTake?.(item);
      w({ value: item, done: false });
    } else this.#items.push(item);
    return true;
  }

  /** No more items: the consumer finishes after the queued ones. */
  end(): void {
    if (this.ended) return;
    this.#ended = true;
    this.#waiting?.({ value: undefined, done: true });
    this.#waiting = this.#failWaiting = undefined;
  }

  /** The consumer throws `error` after the queued items. */
  fail(error: unknown): void {
    if (this.ended) return;
    this.#failed = true;
    this.#error = error;
    this.#failWaiting?.(error);
    this.#waiting = this.#failWaiting = undefined;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.#items.length > 0) {
          const value = this.#items.shift()!;
          this.onTake?.(value);
          return Promise.resolve({ value, done: false });
        }
        if (this.#failed) return Promise.reject(this.#error);
        if (this.#ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.#waiting = resolve;
          this.#failWaiting = reject;
        });
      },
      // a consumer that stops early (or a transport that fails) ends the queue
      return: () => {
        this.end();
        this.#items.length = 0;
        return Promise.resolve({ value: undefined, done: true });
      },
      throw: (e: unknown) => {
        this.fail(e);
        this.#items.length = 0;
        return Promise.reject(e);
      },
    };
  }
}
