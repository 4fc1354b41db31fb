// Waiting requests in the order they get their turn: first in, first out within a key (an
// API key), round-robin between keys, so one client with many requests cannot starve another;
// bounded in total.

export class FairQueue<T> {
  /** each key's items, oldest first; the map's order is the keys' order of turns */
  readonly #byKey = new Map<string, T[]>();
  #size = 0;

  constructor(readonly max: number) {}

  get size(): number {
    return this.#size;
  }

  /** Appends to the key's line (a new key takes its turn after every waiting key); false when full. */
  push(key: string, item: T): boolean {
    if (this.#size >= this.max) return false;
    const line = this.#byKey.get(key);
    if (line) line.push(item);
    else this.#byKey.set(key, [item]);
    this.#size++;
    return true;
  }

  /** Every item in turn order: each key's line in the rotation's order, oldest first. */
  *inTurn(): Generator<{ key: string; item: T }> {
    for (const [key, line] of this.#byKey) for (const item of line) yield { key, item };
  }

  /** The item whose turn it is, left in place. */
  peek(): { key: string; item: T } | undefined {
    for (const [key, line] of this.#byKey) return { key, item: line[0] };
    return undefined;
  }

  /** The item got its turn: out it goes, and its key moves to the back of the rotation. */
  served(key: string, item: T): boolean {
    const line = this.#take(key, item);
    if (line?.length) {
      this.#byKey.delete(key);
      this.#byKey.set(key, line);
    }
    return !!line;
  }

  /** The item leaves without a turn (its deadline, its client gone): its key keeps its place. */
  remove(key: string, item: T): boolean {
    return !!this.#take(key, item);
  }

  #take(key: string, item: T): T[] | undefined {
    const line = this.#byKey.get(key);
    const i = line?.indexOf(item) ?? -1;
    if (!line || i < 0) return undefined;
    line.splice(i, 1);
    this.#size--;
    if (line.length === 0) this.#byKey.delete(key);
    return line;
  }

  /** Every item, in no particular order (to refuse them all at shutdown). */
  items(): T[] {
    return [...this.#byKey.values()].flat();
  }
}
