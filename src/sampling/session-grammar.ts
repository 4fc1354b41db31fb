// A session's grammar where it samples: llama.cpp's grammar state (the engine's), advanced by
// each token the session samples. It follows positions, so a step taken back (a repair trims
// the route to where every hop stands) is sampled again from the state before it.
import type { Grammar } from "../engine/range-engine.ts";

export class SessionGrammar {
  #grammar: Grammar | undefined;
  /** [position, token] of every token accepted since the history, in position order */
  #accepted: Array<[number, number]> = [];
  #closed = false;

  /**
   * `history`: the tokens the session generated before this route took it over, which the
   * grammar has already seen.
   */
  constructor(
    private readonly make: () => Promise<Grammar>,
    private readonly history: readonly number[] = [],
  ) {}

  /** Makes the grammar now: a bad grammar or history is refused before any step. */
  async ready(): Promise<void> {
    await this.#current();
  }

  /** Rejects, in place, the tokens the grammar does not allow at `position`. */
  async mask(logits: Float32Array, position: number): Promise<void> {
    await this.#at(position);
    await (await this.#current()).mask(logits);
  }

  /**
   * Takes `token` at `position` if the grammar allows it there (true), else changes nothing
   * (false): one token's check instead of the whole vocabulary's mask.
   */
  async offer(position: number, token: number): Promise<boolean> {
    await this.#at(position);
    try {
      await (await this.#current()).accept(token);
    } catch (e) {
      if ((e as { code?: string }).code === "bad_input") return false;
      throw e;
    }
    this.#accepted.push([position, token]);
    return true;
  }

  /** The token sampled at `position`. */
  async accept(position: number, token: number): Promise<void> {
    await (await this.#current()).accept(token);
    this.#accepted.push([position, token]);
  }

  async close(): Promise<void> {
    this.#closed = true;
    const g = this.#grammar;
    this.#grammar = undefined;
    await g?.close();
  }

  async #current(): Promise<Grammar> {
    if (this.#grammar) return this.#grammar;
    if (this.#closed) throw new Error("the session's grammar is closed");
    const g = await this.make();
    try {
      for (const t of this.history) await g.accept(t);
      for (const [, t] of this.#accepted) await g.accept(t);
    } catch (err) {
      await g.close();
      throw err;
    }
    if (this.#closed) {
      await g.close();
      throw new Error("the session's grammar is closed");
    }
    this.#grammar = g;
    return g;
  }

  /** A position at or before one already taken: a step was taken back. */
  async #at(position: number): Promise<void> {
    const last = this.#accepted.at(-1);
    if (last && last[0] >= position) await this.#rewind(position);
  }

  /** Back to the state before `position`: made again from what came before it. */
  async #rewind(position: number): Promise<void> {
    this.#accepted = this.#accepted.filter(([at]) => at < position);
    const g = this.#grammar;
    this.#grammar = undefined;
    await g?.close();
  }
}
