// Output-quality drift of a lane against the reference (F32 Transformers), position by position
// over a fixed text: the mean KL divergence of the next-token distribution, KL(P_ref ‖ Q), and
// how often the top token agrees.

export class Drift {
  #kl = 0;
  #agree = 0;
  #n = 0;
  #maxKl = 0;

  /** One position: the reference's log-probabilities and the lane's logits (or its top token). */
  add(refLogprobs: Float32Array, lane: Float32Array | number): void {
    const refTop = argmax(refLogprobs);
    if (typeof lane === "number") {
      this.#agree += lane === refTop ? 1 : 0;
      this.#n++;
      return;
    }
    const lse = logSumExp(lane);
    let kl = 0;
    for (let i = 0; i < refLogprobs.length; i++) {
      const lp = refLogprobs[i];
      if (lp < -80) continue; // probability below 1e-35: nothing to the sum
      kl += Math.exp(lp) * (lp - (lane[i] - lse));
    }
    this.#kl += kl;
    this.#maxKl = Math.max(this.#maxKl, kl);
    this.#agree += argmax(lane) === refTop ? 1 : 0;
    this.#n++;
  }

  summary() {
    return {
      positions: this.#n,
      // undefined for a lane compared by its tokens only
      kl_mean: this.#maxKl > 0 || this.#kl > 0 ? this.#kl / this.#n : undefined,
      kl_max: this.#maxKl > 0 ? this.#maxKl : undefined,
      top1_agreement: this.#agree / this.#n,
    };
  }
}

export function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

function logSumExp(x: Float32Array): number {
  let m = -Infinity;
  for (const v of x) m = Math.max(m, v);
  let s = 0;
  for (const v of x) s += Math.exp(v - m);
  return m + Math.log(s);
}

/** Reads the reference's log-probabilities (positions × vocab f32, as the lane script wrote them) row by row. */
export class RefRows {
  private constructor(
    private readonly file: Deno.FsFile,
    readonly vocab: number,
    readonly positions: number,
  ) {}

  static async open(path: string, vocab: number): Promise<RefRows> {
    const size = (await Deno.stat(path)).size;
    if (size % (vocab * 4) !== 0) {
      throw new Error(`${path}: ${size} bytes is no whole number of rows of ${vocab}`);
    }
    return new RefRows(await Deno.open(path), vocab, size / (vocab * 4));
  }

  async row(i: number): Promise<Float32Array> {
    const out = new Float32Array(this.vocab);
    const bytes = new Uint8Array(out.buffer);
    await this.file.seek(i * this.vocab * 4, Deno.SeekMode.Start);
    for (let got = 0; got < bytes.length;) {
      const n = await this.file.read(bytes.subarray(got));
      if (n === null) throw new Error(`reference row ${i} is short`);
      got += n;
    }
    return out;
  }

  close(): void {
    this.file.close();
  }
}
