// Where route epochs come from. A session's routes must carry growing epochs (a node refuses
// a route older than the one it holds the session under), and with tracker replicas the next
// route of a session may come from another replica than the last.

/** Hands out epochs, each above every one this source gave before and above `after`. */
export interface EpochSource {
  take(n: number, after: bigint): bigint[] | Promise<bigint[]>;
}

/** One tracker's own epochs: from its start time × 1000, counting up, so a restarted tracker
 *  is above every epoch of its last run (at under 1000 routes a millisecond). */
export class ClockEpochs implements EpochSource {
  #next: bigint;
  constructor(now: number) {
    this.#next = BigInt(now) * 1000n + 1n;
  }
  take(n: number, after: bigint): bigint[] {
    if (this.#next <= after) this.#next = after + 1n;
    return Array.from({ length: n }, () => this.#next++);
  }
}

/**
 * Epochs of replicas sharing one counter: each replica reserves a block of them at a time
 * (one database write per block), so epochs are unique across replicas and increasing within
 * each. A route asked above what the block holds (a repair after another replica's route)
 * reserves past it.
 */
export class BlockEpochs implements EpochSource {
  #next = 0n;
  #end = 0n;
  #reserving: Promise<void> | undefined;

  /** reserve(count, after): the first of `count` consecutive epochs, all above `after` */
  constructor(
    private readonly reserve: (count: number, after: bigint) => Promise<bigint>,
    private readonly block = 1024,
  ) {}

  async take(n: number, after: bigint): Promise<bigint[]> {
    // one reservation at a time: concurrent routes wait on the same block
    while (this.#end - this.#next < BigInt(n) || this.#next <= after) {
      if (!this.#reserving) {
        const floor = after > this.#end ? after : this.#end;
        const count = Math.max(this.block, n);
        this.#reserving = this.reserve(count, floor).then((first) => {
          this.#next = first;
          this.#end = first + BigInt(count);
        }).finally(() => (this.#reserving = undefined));
      }
      await this.#reserving;
    }
    return Array.from({ length: n }, () => this.#next++);
  }
}
