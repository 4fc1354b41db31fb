// The gateway's watch on the nodes its open sessions run through. A seam to a dead node
// should fail on its own, but a connection can die without a word reaching every stream
// (a peer's host vanishing, a lost FIN): the tracker's leases are the independent witness.
// While anything is watched, the watch asks the tracker about exactly those nodes. A lapsed
// lease alone does not end a session: a busy node can beat late and still answer.

/** Of the named nodes, those the tracker still sees as live. */
export type LiveNodes = (nodes: readonly string[]) => Promise<ReadonlySet<string>>;

interface Watcher {
  readonly nodes: readonly string[];
  readonly lost: (node: string) => void;
}

export class NodeWatch {
  readonly #watchers = new Set<Watcher>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /** `everyMs`: how often the tracker is asked (a fraction of its lease). */
  constructor(private readonly live: LiveNodes, private readonly everyMs = 1_000) {}

  /**
   * Calls `lost` with the first of `nodes` the tracker no longer sees as live, at every look
   * while it is gone (the caller decides when that ends its session); returns the unwatch.
   */
  watch(nodes: readonly string[], lost: (node: string) => void): () => void {
    const w: Watcher = { nodes, lost };
    this.#watchers.add(w);
    this.#schedule();
    return () => void this.#watchers.delete(w);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#watchers.clear();
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#closed || this.#watchers.size === 0) return;
    this.#timer = setTimeout(() => void this.#check(), this.everyMs);
  }

  async #check(): Promise<void> {
    const watchers = [...this.#watchers];
    const names = [...new Set(watchers.flatMap((w) => w.nodes))];
    let live: ReadonlySet<string> | undefined;
    try {
      live = await this.live(names);
    } catch {
      // the tracker not answering says nothing about the nodes: ask again next time
    }
    for (const w of live ? watchers : []) {
      const gone = w.nodes.find((n) => !live!.has(n));
      if (gone !== undefined && this.#watchers.has(w)) w.lost(gone);
    }
    this.#timer = undefined;
    this.#schedule();
  }
}
