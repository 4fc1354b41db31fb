// An in-memory connection for the fast seam and direct tracker calls: what one end writes
// reaches the other in pieces of varying size, later and in order (as TCP may cut it).
import type { ByteDuplex } from "../../src/seam/mux.ts";

/** One end of an in-memory connection; what it writes reaches the other end in pieces. */
export class MemoryEnd implements ByteDuplex {
  peer!: MemoryEnd;
  pause?: () => void;
  resume?: () => void;
  readonly #data: ((b: Uint8Array) => void)[] = [];
  readonly #close: ((why: string) => void)[] = [];
  closed = false;
  written = 0;

  constructor(private readonly piece: () => number) {}

  write(parts: readonly Uint8Array[]): void {
    if (this.closed) return;
    const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) (all.set(p, at), (at += p.length));
    this.written += all.length;
    // cut into pieces of varying size, delivered later and in order
    for (let i = 0; i < all.length;) {
      const n = Math.max(1, Math.min(this.piece(), all.length - i));
      const chunk = all.slice(i, i + n);
      queueMicrotask(() => this.peer.deliver(chunk));
      i += n;
    }
  }

  deliver(chunk: Uint8Array): void {
    // (a copy: a handler may add the next one, which must not see this chunk again)
    if (!this.closed) { for (const h of [...this.#data]) h(chunk); }
  }

  onData(h: (b: Uint8Array) => void): void {
    this.#data.push(h);
  }

  onClose(h: (why: string) => void): void {
    this.#close.push(h);
  }

  close(): void {
    this.end("closed");
    queueMicrotask(() => this.peer.end("reset by peer"));
  }

  end(why: string): void {
    if (this.closed) return;
    this.closed = true;
    for (const h of this.#close) h(why);
  }
}

export function pair(piece = () => 1 + Math.floor(Math.random() * 700)) {
  const a = new MemoryEnd(piece);
  const b = new MemoryEnd(piece);
  a.peer = b;
  b.peer = a;
  return { client: a, server: b };
}
