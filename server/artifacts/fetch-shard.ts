// A Deno node's shard from an artifact URL: the manifest from the origin, the pieces of its
// layers from the origin and every peer the tracker knows to hold them, kept in the piece
// store (a restart resumes), assembled into a sparse file the native engine loads.
import { type ArtifactManifest, manifestFromResponse } from "../../src/artifact/pieces.ts";
import { type DownloadReport, downloadShard, type PieceSource } from "../../src/artifact/download.ts";
import { isRelayHopUrl } from "../../src/route/hop-url.ts";
import { RelayPeer } from "../../src/relay/peer.ts";
import { relayPieceFetch } from "../../src/relay/piece-fetch.ts";
import { connectRelay } from "../../node-apis/relay/ws-socket.ts";
import { bytesToHex } from "../../src/bytes/hex.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { cacheDir } from "../process/paths.ts";
import { progress } from "../log/progress.ts";
import { log } from "../log/log.ts";
import { pieceStore } from "../host/piece-store.ts";
import { writeSparseFile } from "./sparse-file.ts";
import { trustedFetch } from "../../node-apis/tls/trust.ts";

const ARTIFACT_URL = /^(https?:\/\/.+\/artifacts\/)([0-9a-f]{64})\/?$/;

export function isArtifactUrl(s: string): boolean {
  return ARTIFACT_URL.test(s);
}

export async function fetchManifest(url: string, fetcher = trustedFetch()): Promise<ArtifactManifest> {
  const m = ARTIFACT_URL.exec(url);
  if (!m) throw new Error(`"${url}" is not an artifact URL (…/artifacts/<sha256>)`);
  const r = await fetcher(`${m[1]}${m[2]}/manifest`);
  if (!r.ok) throw new Error(`manifest ${url}: HTTP ${r.status}`);
  return await manifestFromResponse(r, m[2]);
}

/** Peers the tracker knows to serve this artifact's bytes, each with the layers it holds. */
/** Live peers holding this artifact's pieces; `relay`: also tabs reached through that relay. */
export async function peerSources(
  trackerUrl: string,
  artifact: string,
  relay?: string,
): Promise<PieceSource[]> {
  const t = trackerClient(trackerUrl);
  try {
    const { nodes } = await t.client.nodes({}, { timeoutMs: 5000 });
    return nodes
      // tabs serve theirs through the relay: only with a connection to it
      .filter((n) =>
        n.live && n.shard?.artifactUrl && n.shard.range && bytesToHex(n.shard.artifactSha256) === artifact &&
        (!isRelayHopUrl(n.shard.artifactUrl) ||
          (relay !== undefined && n.shard.artifactUrl.startsWith(`relay+${relay}/`)))
      )
      .map((n) => ({
        url: n.shard!.artifactUrl,
        layers: { start: n.shard!.range!.start, end: n.shard!.range!.end },
      }));
  } finally {
    t.close();
  }
}

export interface FetchedShard {
  readonly path: string;
  readonly manifest: ArtifactManifest;
  readonly report: Omit<DownloadReport, "model">;
}

export async function fetchShardFile(
  url: string,
  layers: { start: number; end: number },
  /** relay: reach tabs through it (`peer`: on this open connection, else on one of its own) */
  o: { tracker?: string; relay?: { url: string; token: string; peer?: RelayPeer } } = {},
): Promise<FetchedShard> {
  const manifest = await fetchManifest(url);
  const relayUrl = o.relay?.url.replace(/\/$/, "");
  const peers = o.tracker ? await peerSources(o.tracker, manifest.artifact, relayUrl).catch(() => []) : [];
  // tabs among the peers are reached through the relay, on a connection of the download's own
  // (closed before the node connects as itself)
  const own = o.relay && !o.relay.peer && peers.some((p) => isRelayHopUrl(p.url))
    ? new RelayPeer(await connectRelay(o.relay.url, o.relay.token), o.relay.token.split(".")[0])
    : undefined;
  const relayPeer = o.relay?.peer ?? own;
  const bar = progress(`shard: downloading layers ${layers.start}:${layers.end}`, 1);
  const { model, ...report } = await downloadShard({
    manifest,
    ...layers,
    sources: [{ url: url.replace(/\/$/, "") }, ...peers],
    store: pieceStore(),
    fetch: relayPeer ? relayPieceFetch(relayPeer, relayUrl!, trustedFetch()) : trustedFetch(),
    onProgress: (p) => bar.update(p.bytesDone, p.bytes),
  }).finally(() => own?.close());
  const mib = (n: number) => (n / 2 ** 20).toFixed(1);
  bar.finish(
    `${mib(report.fetchedBytes)} MiB fetched, ${mib(report.cachedBytes)} MiB cached, of a ${
      mib(manifest.fileSize)
    } MiB file`,
  );
  const path = cacheDir("shards", `${manifest.artifact}-${layers.start}-${layers.end}.gguf`);
  Deno.mkdirSync(cacheDir("shards"), { recursive: true });
  await writeSparseFile(path, model);
  log.info("shard.fetched", {
    artifact: manifest.artifact,
    layers: `${layers.start}:${layers.end}`,
    ...report,
  });
  return { path, manifest, report };
}
