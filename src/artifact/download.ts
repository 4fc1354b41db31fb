// Downloads the pieces a Shard needs from several sources at once, checks every piece
// against the manifest's hash, and refetches a bad one from another source. Pieces
// already in the store are reused, so an interrupted download resumes where it stopped.
import { sha256Hex } from "../gguf/manifest.ts";
import { type ArtifactManifest, checkHeaderAgainst, type Piece, shardPieces } from "./pieces.ts";
import type { SparseModel } from "./sparse.ts";
import type { PieceStore } from "./store.ts";
import { readAtMost } from "../bytes/read-at-most.ts";

/** A place serving the artifact's bytes with HTTP Range; a peer holds only its layers. */
export interface PieceSource {
  readonly url: string;
  /** the layers whose tensors it holds (the header always); undefined: the whole file */
  readonly layers?: { readonly start: number; readonly end: number };
}

export interface DownloadProgress {
  readonly pieces: number;
  readonly piecesDone: number;
  readonly bytes: number;
  readonly bytesDone: number;
}

export interface DownloadReport {
  readonly model: SparseModel;
  /** bytes the shard needs, and of them: fetched now, found in the store */
  readonly shardBytes: number;
  readonly fetchedBytes: number;
  readonly cachedBytes: number;
  /** pieces fetched from each source, and their bytes */
  readonly bySource: Readonly<Record<string, number>>;
  readonly bytesBySource: Readonly<Record<string, number>>;
  /** fetches refused (wrong hash, wrong length, HTTP error), each then tried elsewhere */
  readonly rejected: ReadonlyArray<
    { readonly source: string; readonly offset: number; readonly reason: string }
  >;
}

export class DownloadError extends Error {
  override readonly name = "DownloadError";
}

export interface DownloadOptions {
  readonly manifest: ArtifactManifest;
  readonly start: number;
  readonly end: number;
  readonly sources: readonly PieceSource[];
  readonly store: PieceStore;
  readonly concurrency?: number;
  readonly fetch?: typeof fetch;
  readonly signal?: AbortSignal;
  readonly onProgress?: (p: DownloadProgress) => void;
}

/** Whether a source holds a piece: the header always, a tensor when its layer is the source's. */
function holder(m: ArtifactManifest) {
  const byOffset = [...m.tensors].sort((a, b) => a.offset - b.offset);
  const tensorOf = (offset: number) => {
    let lo = 0, hi = byOffset.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (byOffset[mid].offset <= offset) lo = mid;
      else hi = mid - 1;
    }
    return byOffset[lo];
  };
  return (s: PieceSource, p: Piece): boolean => {
    if (!s.layers || p.offset < m.dataOffset) return true;
    const t = tensorOf(p.offset);
    const { start, end } = s.layers;
    if (t.role === "layer") return t.layer! >= start && t.layer! < end;
    if (t.role === "input") return start === 0 || (end === m.nLayer && m.tiedEmbeddings);
    if (t.role === "output") return end === m.nLayer;
    return true;
  };
}

export async function downloadShard(o: DownloadOptions): Promise<DownloadReport> {
  const m = o.manifest;
  const pieces = shardPieces(m, o.start, o.end);
  const holds = holder(m);
  const get = o.fetch ?? fetch;
  const total = pieces.reduce((n, p) => n + p.size, 0);
  const got = new Map<number, Uint8Array>();
  const bySource: Record<string, number> = {};
  const bytesBySource: Record<string, number> = {};
  const rejected: Array<{ source: string; offset: number; reason: string }> = [];
  let fetchedBytes = 0, cachedBytes = 0, done = 0, bytesDone = 0, turn = 0;

  const fetchPiece = async (p: Piece): Promise<Uint8Array> => {
    const able = o.sources.filter((s) => holds(s, p));
    if (!able.length) throw new DownloadError(`no source holds the piece at ${p.offset}`);
    // spread pieces over the sources able to serve them, then fall back in order
    const first = turn++ % able.length;
    for (let k = 0; k < able.length; k++) {
      const s = able[(first + k) % able.length];
      const reason = await (async () => {
        try {
          const r = await get(s.url, {
            headers: { range: `bytes=${p.offset}-${p.offset + p.size - 1}` },
            signal: o.signal,
          });
          if (r.status !== 206) {
            await r.body?.cancel();
            return `HTTP ${r.status}`;
          }
          // a source that sends more than the piece is cut off there, not read to its end
          const bytes = await readAtMost(r.body, p.size);
          if (!bytes) return `more than ${p.size} bytes`;
          if (bytes.length !== p.size) return `${bytes.length} bytes, not ${p.size}`;
          if ((await sha256Hex(bytes)) !== p.sha256) return "sha256 mismatch";
          bySource[s.url] = (bySource[s.url] ?? 0) + 1;
          bytesBySource[s.url] = (bytesBySource[s.url] ?? 0) + bytes.length;
          fetchedBytes += bytes.length;
          return bytes;
        } catch (e) {
          if (o.signal?.aborted) throw e;
          return e instanceof Error ? e.message : String(e);
        }
      })();
      if (reason instanceof Uint8Array) return reason;
      rejected.push({ source: s.url, offset: p.offset, reason });
    }
    throw new DownloadError(
      `the piece at ${p.offset} (${p.size} bytes) failed from every source: ${
        rejected.filter((r) => r.offset === p.offset).map((r) => `${r.source}: ${r.reason}`).join("; ")
      }`,
    );
  };

  const obtain = async (p: Piece) => {
    const cached = await o.store.get(p.sha256);
    let bytes: Uint8Array;
    // a store is a cache: what it returns is checked like anything fetched
    if (cached && cached.length === p.size && (await sha256Hex(cached)) === p.sha256) {
      bytes = cached;
      cachedBytes += bytes.length;
    } else {
      bytes = await fetchPiece(p);
      await o.store.put(p.sha256, bytes);
    }
    got.set(p.offset, bytes);
    done++;
    bytesDone += bytes.length;
    o.onProgress?.({ pieces: pieces.length, piecesDone: done, bytes: total, bytesDone });
  };

  // the header first: it must describe the manifest's tensors before anything else counts
  await obtain(pieces[0]);
  checkHeaderAgainst(m, got.get(pieces[0].offset)!);
  const queue = pieces.slice(1);
  const worker = async () => {
    for (let p = queue.shift(); p; p = queue.shift()) await obtain(p);
  };
  await Promise.all(Array.from({ length: Math.max(1, o.concurrency ?? 4) }, worker));

  const spans = pieces.map((p) => ({ offset: p.offset, bytes: got.get(p.offset)! }));
  return {
    model: { size: m.fileSize, spans },
    shardBytes: total,
    fetchedBytes,
    cachedBytes,
    bySource,
    bytesBySource,
    rejected,
  };
}
