// A model file of which only some byte spans are present: a shard's header and tensors.
// Layer-range loading reads nothing else, so the engine can load it as if it were whole.
export interface SparseModel {
  /** the artifact's full size: offsets stay the file's own */
  readonly size: number;
  /** present bytes, in file order, not overlapping */
  readonly spans: ReadonlyArray<{ readonly offset: number; readonly bytes: Uint8Array }>;
}

export function presentBytes(m: SparseModel): number {
  return m.spans.reduce((n, s) => n + s.bytes.length, 0);
}

/**
 * Copies [position, position + length) into `dst` (zeros where nothing is present);
 * returns the bytes copied, fewer at the end of the file.
 */
export function readSparse(m: SparseModel, dst: Uint8Array, position: number, length: number): number {
  const n = Math.max(0, Math.min(length, m.size - position));
  dst.fill(0, 0, n);
  // spans are sorted: binary search the first that ends after position
  let lo = 0, hi = m.spans.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const s = m.spans[mid];
    if (s.offset + s.bytes.length <= position) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo; i < m.spans.length; i++) {
    const s = m.spans[i];
    if (s.offset >= position + n) break;
    const from = Math.max(position, s.offset);
    const to = Math.min(position + n, s.offset + s.bytes.length);
    dst.set(s.bytes.subarray(from - s.offset, to - s.offset), from - position);
  }
  return n;
}
