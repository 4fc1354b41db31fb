// A holder serving its range's pieces to others: a request names a piece by offset and size,
// and only a piece of the range, as the manifest cuts it, is answered, from the store (which
// keeps pieces by their sha256).
import type { PieceServe } from "../relay/peer.ts";
import { type ArtifactManifest, shardPieces } from "./pieces.ts";
import type { PieceStore } from "./store.ts";

export function rangePieces(m: ArtifactManifest, start: number, end: number, store: PieceStore): PieceServe {
  const held = new Map(shardPieces(m, start, end).map((p) => [p.offset, p]));
  return async (offset, size) => {
    const p = held.get(offset);
    if (!p || p.size !== size) return undefined;
    const bytes = await store.get(p.sha256);
    return bytes && bytes.length === p.size ? bytes : undefined;
  };
}
