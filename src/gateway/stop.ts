// Stop sequences over streamed text: text is released only once no stop sequence can
// still begin inside it, and the output ends just before the first stop sequence.

export class StopMatcher {
  #text = "";
  #released = 0;

  constructor(readonly stops: readonly string[]) {}

  /** Takes the whole text so far; returns what may be released now and whether a stop was hit. */
  update(text: string): { release: string; stopped: boolean } {
    this.#text = text;
    let cut = -1;
    // released text holds no start of a stop sequence (it would have been held back)
    for (const s of this.stops) {
      const i = text.indexOf(s, this.#released);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut >= 0) return { release: this.#take(cut), stopped: true };
    // hold back a tail that could be the start of a stop sequence
    let hold = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, text.length); k > hold; k--) {
        if (text.endsWith(s.slice(0, k))) {
          hold = k;
          break;
        }
      }
    }
    return { release: this.#take(text.length - hold), stopped: false };
  }

  /** At the end without a stop: the rest. */
  flush(): string {
    return this.#take(this.#text.length);
  }

  #take(upTo: number): string {
    if (upTo <= this.#released) return "";
    const out = this.#text.slice(this.#released, upTo);
    this.#released = upTo;
    return out;
  }
}
