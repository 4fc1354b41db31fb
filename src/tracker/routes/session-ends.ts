// How a gateway's session ends reach the tracker. A busy gateway ends hundreds of sessions
// a second, and a `Done` call each would cost the tracker about as much as the routes
// themselves: ends that come while a call is in flight go together in the next call. A quiet
// gateway's end goes at once; under load the batches grow with the tracker's answer time.

/** The most sessions one `Done` may name; the tracker refuses more. */
export const MAX_DONE_SESSIONS = 4096;

interface Waiting {
  readonly id: string;
  readonly resolve: () => void;
  readonly reject: (e: unknown) => void;
}

export class SessionEnds {
  #waiting: Waiting[] = [];
  #sending = false;
  /** `Done` calls made, and the session ends they carried */
  calls = 0;
  carried = 0;

  /** `send` delivers one batch (one `Done` call): the first id, then the rest. */
  constructor(private readonly send: (first: string, rest: string[]) => Promise<void>) {}

  /** Settles when the batch that carried this end was delivered, or failed. */
  end(sessionId: string): Promise<void> {
    const p = new Promise<void>((resolve, reject) => this.#waiting.push({ id: sessionId, resolve, reject }));
    void this.#pump();
    return p;
  }

  async #pump(): Promise<void> {
    if (this.#sending) return;
    this.#sending = true;
    try {
      while (this.#waiting.length > 0) {
        const batch = this.#waiting.splice(0, MAX_DONE_SESSIONS);
        this.calls++;
        this.carried += batch.length;
        try {
          await this.send(batch[0].id, batch.slice(1).map((w) => w.id));
          for (const w of batch) w.resolve();
        } catch (e) {
          for (const w of batch) w.reject(e);
        }
      }
    } finally {
      this.#sending = false;
    }
  }
}
