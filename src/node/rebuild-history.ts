// What a shard sent on to the next shard, kept per session within one budget for the whole node:
// a repair that puts an empty shard after this one rebuilds it from here (rebuild.ts). A session
// whose history stops being whole (the budget ran out, a gap) keeps none.
import type { Tensor } from "../gen/strata/seam/v1/seam_pb.ts";
import type { NodeSession } from "./node-session.ts";

/** hidden states kept for rebuilding a next shard, all sessions together, by default */
const HISTORY_BYTES = 256 * 2 ** 20;

export class RebuildHistory {
  #bytes = 0;

  constructor(readonly budgetBytes = HISTORY_BYTES) {}

  /** bytes kept now, all sessions together */
  get bytes(): number {
    return this.#bytes;
  }

  /** Keeps what went to the next shard, while the node's history budget lasts. */
  keep(s: NodeSession, start: number, rows: number, tensor: Tensor): void {
    if (!s.sent) return;
    const bytes = tensor.data.length + tensor.rowScales.length;
    const at = s.sent.length ? s.sent[s.sent.length - 1].start + s.sent[s.sent.length - 1].rows : s.sentFrom;
    if (start !== at || this.#bytes + bytes > this.budgetBytes) {
      this.forget(s);
      return;
    }
    s.sent.push({ start, rows, tensor });
    s.sentBytes += bytes;
    this.#bytes += bytes;
  }

  forget(s: NodeSession): void {
    this.#bytes -= s.sentBytes;
    s.sent = undefined;
    s.sentBytes = 0;
  }

  /** A repair's session `s` takes over `old`'s KV cut back to `at`: and what `old` sent before there. */
  handOn(old: NodeSession, s: NodeSession, at: number): void {
    s.sentFrom = Math.min(old.sentFrom, at);
    const sent = old.sent?.filter((e) => e.start < at);
    s.sent = sent && sent.every((e) => e.start + e.rows <= at) ? sent : undefined;
    s.sentBytes = s.sent
      ? s.sent.reduce((n, e) => n + e.tensor.data.length + e.tensor.rowScales.length, 0)
      : 0;
    this.#bytes += s.sentBytes - old.sentBytes;
    old.sent = undefined;
    old.sentBytes = 0;
  }
}
