// A Model Artifact cut into content-hashed pieces: the header, then every tensor in
// pieces of at most PIECE_BYTES. A shard downloads the pieces of its tensors, from any
// source, and trusts a piece only when its bytes hash to what the manifest says.
import { buildManifest, type Manifest, sha256Hex, shardBytes } from "../gguf/manifest.ts";
import { MAX_BLOCKS, MAX_TENSORS, parseGgufHeader } from "../gguf/reader.ts";
import { readAtMost } from "../bytes/read-at-most.ts";

/** Large tensors are split so a failed or tampered fetch costs at most this much again. */
export const PIECE_BYTES = 4 * 1024 * 1024;

export interface Piece {
  /** absolute byte offset in the artifact */
  readonly offset: number;
  readonly size: number;
  /** sha256 of exactly these bytes, lower-case hex */
  readonly sha256: string;
}

/** A manifest with the hashes a downloader checks; `pieces[0]` is the header. */
export interface ArtifactManifest extends Manifest {
  readonly pieces: readonly Piece[];
}

/** Where pieces lie, before hashing: the header, then each tensor cut at PIECE_BYTES. */
export function pieceSpans(m: Manifest): Array<readonly [number, number]> {
  const spans: Array<readonly [number, number]> = [[0, m.dataOffset]];
  for (const t of [...m.tensors].sort((a, b) => a.offset - b.offset)) {
    for (let o = 0; o < t.size; o += PIECE_BYTES) {
      spans.push([t.offset + o, Math.min(PIECE_BYTES, t.size - o)]);
    }
  }
  return spans;
}

/** The manifest, piece hashes included, of a whole artifact held in memory (synthetic models). */
export async function manifestOfBytes(file: Uint8Array): Promise<ArtifactManifest> {
  const m = buildManifest(
    parseGgufHeader(file, { fileSize: file.length }),
    file.length,
    await sha256Hex(file),
  );
  const pieces = await Promise.all(
    pieceSpans(m).map(async ([offset, size]) => ({
      offset,
      size,
      sha256: await sha256Hex(file.subarray(offset, offset + size)),
    })),
  );
  return { ...m, pieces };
}

/** The pieces a Shard [start, end) needs: the header and its tensors' pieces, in file order. */
export function shardPieces(m: ArtifactManifest, start: number, end: number): Piece[] {
  const needs = shardBytes(m, start, end).tensors;
  const inTensor = (p: Piece) => needs.some((t) => p.offset >= t.offset && p.offset < t.offset + t.size);
  return m.pieces.filter((p, i) => i === 0 || inTensor(p));
}

export class ManifestError extends Error {
  override readonly name = "ManifestError";
}

/** A manifest response's body may hold this much (a 1 TB artifact in 4 MiB pieces takes ~30 MB). */
export const MAX_MANIFEST_BYTES = 128 << 20;

/** The manifest an origin answered, read with a bound and checked (checkManifest). */
export async function manifestFromResponse(r: Response, artifact: string): Promise<ArtifactManifest> {
  const bytes = await readAtMost(r.body, MAX_MANIFEST_BYTES);
  if (!bytes) throw new ManifestError(`a manifest of more than ${MAX_MANIFEST_BYTES} bytes`);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new ManifestError("the manifest is not JSON");
  }
  return checkManifest(json, artifact);
}

/**
 * Accepts a manifest only for the artifact asked for, with pieces that tile its header and
 * tensors exactly as pieceSpans would cut them.
 */
export function checkManifest(json: unknown, artifact: string): ArtifactManifest {
  const m = json as ArtifactManifest;
  if (!m || typeof m !== "object" || !Array.isArray(m.pieces) || !Array.isArray(m.tensors)) {
    throw new ManifestError("not an artifact manifest");
  }
  if (m.artifact !== artifact) {
    throw new ManifestError(
      `the manifest is for artifact ${String(m.artifact).slice(0, 12)}…, not ${artifact.slice(0, 12)}…`,
    );
  }
  checkShape(m);
  const spans = pieceSpans(m);
  if (spans.length !== m.pieces.length) {
    throw new ManifestError(`${m.pieces.length} pieces where the tensors make ${spans.length}`);
  }
  m.pieces.forEach((p, i) => {
    if (p.offset !== spans[i][0] || p.size !== spans[i][1] || !/^[0-9a-f]{64}$/.test(p.sha256)) {
      throw new ManifestError(`piece ${i} (${p.offset}+${p.size}) does not match the tensors`);
    }
  });
  return m;
}

/** The largest artifact a manifest may describe (64 TiB). */
const MAX_FILE_BYTES = 2 ** 46;

/**
 * A manifest's numbers, checked before anything is planned from them: an origin's manifest is
 * a stranger's JSON, and a tensor claiming 2^53 bytes would be cut into pieces without end.
 * The pieces it must list are counted before any is made.
 */
function checkShape(m: ArtifactManifest): void {
  const int = (v: unknown, lo: number, hi: number) =>
    Number.isSafeInteger(v) && v as number >= lo && v as number <= hi;
  if (!int(m.fileSize, 1, MAX_FILE_BYTES)) throw new ManifestError(`a file size of ${m.fileSize}`);
  if (!int(m.dataOffset, 0, m.fileSize)) throw new ManifestError(`tensor data at ${m.dataOffset}`);
  if (!int(m.nLayer, 1, MAX_BLOCKS)) throw new ManifestError(`${m.nLayer} layers`);
  if (m.tensors.length > MAX_TENSORS) throw new ManifestError(`${m.tensors.length} tensors`);
  if (
    !Array.isArray(m.layers) || m.layers.length !== m.nLayer || !m.layers.every((b) => int(b, 0, m.fileSize))
  ) {
    throw new ManifestError("the layers' byte counts do not match its layers");
  }
  let pieces = 1;
  m.tensors.forEach((t, i) => {
    const ok = !!t && typeof t === "object" && typeof t.name === "string" &&
      int(t.offset, m.dataOffset, m.fileSize) && int(t.size, 0, m.fileSize - t.offset) &&
      (t.layer === null || int(t.layer, 0, m.nLayer - 1));
    if (!ok) throw new ManifestError(`tensor ${i} does not lie inside the file's ${m.nLayer} layers`);
    pieces += Math.ceil(t.size / PIECE_BYTES);
  });
  if (pieces !== m.pieces.length) {
    throw new ManifestError(`${m.pieces.length} pieces where the tensors make ${pieces}`);
  }
}

/**
 * The header's bytes (piece 0, already hash-checked) must describe the same tensors as the
 * manifest: a manifest cannot send a loader to other offsets than the file's own header.
 */
export function checkHeaderAgainst(m: ArtifactManifest, header: Uint8Array): void {
  const again = buildManifest(parseGgufHeader(header, { fileSize: m.fileSize }), m.fileSize, m.artifact);
  const same = again.tensors.length === m.tensors.length &&
    again.tensors.every((t, i) =>
      t.name === m.tensors[i].name && t.offset === m.tensors[i].offset && t.size === m.tensors[i].size
    );
  if (!same) throw new ManifestError("the artifact's header lists other tensors than its manifest");
}
