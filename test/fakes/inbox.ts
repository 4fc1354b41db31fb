// Reads a stream of replies as they come, so a test can wait for the one it expects without
// racing the reader: every item is kept, `until` resolves on the first (or next) match.
export class Inbox<T> {
  readonly items: T[] = [];
  ended = false;
  error?: unknown;
  /** resolves when the stream ends or fails */
  readonly done: Promise<void>;
  #waiters: Array<() => void> = [];

  constructor(stream: AsyncIterable<T>) {
    this.done = (async () => {
      try {
        for await (const item of stream) {
          this.items.push(item);
          this.#wake();
        }
      } catch (e) {
        this.error = e;
      } finally {
        this.ended = true;
        this.#wake();
      }
    })();
  }

  /** The first item (from index `from` on) that matches; rejects if the stream ends first. */
  async until(match: (item: T) => boolean, from = 0): Promise<T> {
    for (;;) {
      const hit = this.items.slice(from).find(match);
      if (hit !== undefined) return hit;
      if (this.ended) {
        throw new Error(`the stream ended (${this.error ?? "normally"}) before a matching item came`);
      }
      await new Promise<void>((r) => this.#waiters.push(r));
    }
  }

  /** Resolves once at least n items came (or the stream ended). */
  async count(n: number): Promise<T[]> {
    while (this.items.length < n && !this.ended) await new Promise<void>((r) => this.#waiters.push(r));
    return this.items;
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }
}
