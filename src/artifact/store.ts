// Where downloaded pieces are kept, named by their sha256: a browser's OPFS, a directory,
// or memory. A content address makes a cached piece safe to reuse on any later visit.
export interface PieceStore {
  get(sha256: string): Promise<Uint8Array | undefined>;
  put(sha256: string, bytes: Uint8Array): Promise<void>;
}

export class MemoryPieceStore implements PieceStore {
  readonly #pieces = new Map<string, Uint8Array>();
  get(sha256: string): Promise<Uint8Array | undefined> {
    return Promise.resolve(this.#pieces.get(sha256));
  }
  put(sha256: string, bytes: Uint8Array): Promise<void> {
    this.#pieces.set(sha256, bytes);
    return Promise.resolve();
  }
}
