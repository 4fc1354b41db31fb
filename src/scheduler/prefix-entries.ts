// The KV of finished sessions a shard keeps as prefix entries: each holds its engine sequence,
// keyed by its lineage (what computed the shard's input) and its tokens' prefix blocks. A new
// session whose blocks extend an entry's takes the entry's sequence over, cut back to the
// blocks they share, and computes only the rest. Entries are the first to go: the least
// recently used when the budget is exceeded, and any of them before a live session gives way.
import type { SeqId } from "../engine/range-engine.ts";

export interface PrefixKey {
  /** the shard's lineage (hex) */
  readonly lineage: string;
  /** the prefix blocks' keys (hex), in order */
  readonly blocks: readonly string[];
  readonly blockTokens: number;
}

export interface PrefixEntry {
  readonly seq: SeqId;
  /** positions its sequence holds */
  readonly cells: number;
  readonly key: PrefixKey;
  used: number;
}

export interface PrefixBudget {
  /** most entries held (each holds an engine sequence) */
  readonly entries: number;
  /** most KV cells they hold together */
  readonly cells: number;
}

export interface PrefixStats {
  readonly entries: number;
  readonly cells: number;
  readonly budgetEntries: number;
  readonly budgetCells: number;
  readonly hits: number;
  readonly misses: number;
  readonly tokensReused: number;
  readonly evictions: number;
}

/** Positions an entry gives a session: the whole blocks both share, within what it holds. */
function shared(e: PrefixEntry, key: PrefixKey): number {
  if (e.key.lineage !== key.lineage || e.key.blockTokens !== key.blockTokens) return 0;
  let n = 0;
  while (n < key.blocks.length && n < e.key.blocks.length && e.key.blocks[n] === key.blocks[n]) n++;
  return Math.min(n * key.blockTokens, e.cells - (e.cells % key.blockTokens));
}

export class PrefixEntries {
  #entries: PrefixEntry[] = [];
  #tick = 0;
  #hits = 0;
  #misses = 0;
  #reused = 0;
  #evictions = 0;

  constructor(readonly budget: PrefixBudget) {}

  get cells(): number {
    return this.#entries.reduce((n, e) => n + e.cells, 0);
  }

  get size(): number {
    return this.#entries.length;
  }

  /** The entries held now, most recently used first. */
  list(): readonly PrefixEntry[] {
    return [...this.#entries].sort((a, b) => b.used - a.used);
  }

  /**
   * The entry that shares the most with `key` (at most `within` positions), and how many
   * positions it gives; undefined when none shares a whole block. Taken out (its sequence
   * moves to the session), or with `stays` kept as the most recently used (the session gets a
   * copy).
   */
  take(key: PrefixKey, within: number, stays = false): { entry: PrefixEntry; positions: number } | undefined {
    let best: { entry: PrefixEntry; positions: number } | undefined;
    for (const entry of this.#entries) {
      const positions = Math.min(shared(entry, key), within - (within % key.blockTokens));
      if (positions > 0 && (!best || positions > best.positions)) best = { entry, positions };
    }
    if (!best) {
      this.#misses++;
      return undefined;
    }
    if (stays) best.entry.used = ++this.#tick;
    else this.#entries = this.#entries.filter((e) => e !== best.entry);
    this.#hits++;
    this.#reused += best.positions;
    return best;
  }

  /** Keeps an entry; returns those that leave to stay within the budget (oldest use first),
   *  the new one too when it alone exceeds it. */
  add(seq: SeqId, cells: number, key: PrefixKey): PrefixEntry[] {
    this.#entries.push({ seq, cells, key, used: ++this.#tick });
    const out: PrefixEntry[] = [];
    while (
      this.#entries.length > this.budget.entries ||
      (this.#entries.length > 0 && this.cells > this.budget.cells)
    ) {
      out.push(this.oldest()!);
    }
    return out;
  }

  /** The least recently used entry, taken out (an eviction). */
  oldest(): PrefixEntry | undefined {
    if (this.#entries.length === 0) return undefined;
    const e = this.#entries.reduce((a, b) => (a.used <= b.used ? a : b));
    this.#entries = this.#entries.filter((x) => x !== e);
    this.#evictions++;
    return e;
  }

  stats(): PrefixStats {
    return {
      entries: this.#entries.length,
      cells: this.cells,
      budgetEntries: this.budget.entries,
      budgetCells: this.budget.cells,
      hits: this.#hits,
      misses: this.#misses,
      tokensReused: this.#reused,
      evictions: this.#evictions,
    };
  }
}
