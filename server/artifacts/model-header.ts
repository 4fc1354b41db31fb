// What the tracker and the gateway hold of a model: its header and manifest, never its
// weights. From a local GGUF (hashed once, cached), or from an artifact origin: the manifest,
// then the header's bytes by one Range request, checked against the manifest's hash of them.
// The gateway's tokenizer loads from the header alone, kept as a sparse file of the
// artifact's length (llama.cpp checks tensor offsets against the file's size, never reads them).
import { type GgufHeader, metaString, parseGgufHeader } from "../../src/gguf/reader.ts";
import { buildManifest, type Manifest, sha256Hex } from "../../src/gguf/manifest.ts";
import { type ArtifactManifest, checkHeaderAgainst, ManifestError } from "../../src/artifact/pieces.ts";
import { readAtMost } from "../../src/bytes/read-at-most.ts";
import { fetchManifest, isArtifactUrl } from "./fetch-shard.ts";
import { writeSparseFile } from "./sparse-file.ts";
import { trustedFetch } from "../../node-apis/tls/trust.ts";
import { resolveModel } from "../model/fetch.ts";
import { readHeader } from "../model/facts.ts";
import { sha256File } from "../model/hash.ts";
import { cacheDir } from "../process/paths.ts";
import { log } from "../log/log.ts";

export interface ModelHeader {
  readonly name: string;
  readonly header: GgufHeader;
  readonly manifest: Manifest;
  /** a file llama.cpp loads vocab-only: the GGUF itself, or its header in a sparse file
   *  (made only when asked for) */
  readonly headerFile?: string;
  /** where it came from: a local GGUF, or an origin's artifact URL (…/artifacts/<sha256>) */
  readonly source: { readonly path: string } | { readonly url: string; readonly manifest: ArtifactManifest };
}

/** A catalog name, a GGUF path, or an artifact URL; `headerFile`: also a file to load it from. */
export async function openModelHeader(model: string, o: { headerFile?: boolean } = {}): Promise<ModelHeader> {
  if (isArtifactUrl(model)) return await remoteHeader(model.replace(/\/$/, ""), o.headerFile === true);
  const { path, name } = await resolveModel(model);
  const [artifact, header, st] = await Promise.all([sha256File(path), readHeader(path), Deno.stat(path)]);
  return {
    name,
    header,
    manifest: buildManifest(header, st.size, artifact),
    headerFile: path,
    source: { path },
  };
}

async function remoteHeader(url: string, withFile: boolean): Promise<ModelHeader> {
  const fetcher = trustedFetch();
  const manifest = await fetchManifest(url, fetcher);
  const bytes = await headerBytes(url, manifest, fetcher);
  checkHeaderAgainst(manifest, bytes);
  const header = parseGgufHeader(bytes, { fileSize: manifest.fileSize });
  const headerFile = withFile ? cacheDir("headers", `${manifest.artifact}.gguf`) : undefined;
  if (headerFile) {
    Deno.mkdirSync(cacheDir("headers"), { recursive: true });
    await writeSparseFile(headerFile, { size: manifest.fileSize, spans: [{ offset: 0, bytes }] });
  }
  log.info("model header fetched", { url, bytes: bytes.length, of: manifest.fileSize });
  return {
    name: metaString(header, "general.name") ?? `artifact-${manifest.artifact.slice(0, 12)}`,
    header,
    manifest,
    headerFile,
    source: { url, manifest },
  };
}

/** Piece 0, the header, by one Range request, trusted only when it hashes to the manifest's. */
async function headerBytes(url: string, m: ArtifactManifest, fetcher: typeof fetch): Promise<Uint8Array> {
  const piece = m.pieces[0];
  const r = await fetcher(url, { headers: { range: `bytes=0-${piece.size - 1}` } });
  if (r.status !== 206) {
    await r.body?.cancel();
    throw new ManifestError(`${url}: the header's byte range answered HTTP ${r.status}, not 206`);
  }
  const bytes = await readAtMost(r.body, piece.size);
  if (!bytes || bytes.length !== piece.size || (await sha256Hex(bytes)) !== piece.sha256) {
    throw new ManifestError(`${url}: the header's bytes do not hash to the manifest's`);
  }
  return bytes;
}
