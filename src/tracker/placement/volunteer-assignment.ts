// What a browser tab volunteering a shard is offered: the range the fewest live nodes
// serve among those its memory holds, what it takes to host it, the engine settings a tab
// runs with, and where to download the range's bytes (the gateway, and live peers that
// serve theirs).
import { bytesToHex } from "../../bytes/hex.ts";
import { type LayerRange, layerRange } from "../../engine/layer-range.ts";
import { type RangeMemory, type RangeModel, shardMemory } from "../../engine/memory-cap.ts";
import type { NodeState } from "../../gen/strata/tracker/v1/tracker_pb.ts";
import { shardBytes } from "../../gguf/manifest.ts";
import { assignRange } from "./assign.ts";
import { TrackerError } from "../errors.ts";

/** A tab's engine settings: small enough for any laptop, enough for a handful of sessions. */
// batch-invariant: each of the 8 sessions has a KV stream of 1024 cells
export const TAB_ENGINE = { kvCells: 8192, maxSessions: 8, batchTokens: 256 } as const;

export interface VolunteerModel extends RangeModel {
  /** the name clients ask for */
  readonly name: string;
}

/** What the gateway tells a volunteer page (GET /volunteer/config). */
export interface VolunteerConfig {
  readonly model: string;
  readonly artifact: string;
  readonly kv: VolunteerModel["kv"];
  readonly graph: VolunteerModel["graph"];
  /** where the artifact's manifest and pieces are served (an origin, or the gateway) */
  readonly artifactUrl: string;
  /** the relay as tabs reach it */
  readonly relayUrl: string;
  /** the ranges on offer; empty: the tracker places each tab */
  readonly split: ReadonlyArray<{ readonly start: number; readonly end: number }>;
  /** the tracker's Connect service, as the gateway serves it to tabs */
  readonly trackerPath: string;
}

/** A tab's relay identity (POST /volunteer/identity): its name, in an HMAC token. */
export interface VolunteerIdentity {
  readonly name: string;
  readonly token: string;
}

/** What a tab asks the tracker's placement for: its engine's settings under `capBytes`. */
export function tabPlaceRequest(artifactSha256: Uint8Array, capBytes: number) {
  return {
    artifactSha256,
    memoryCapBytes: BigInt(capBytes),
    engine: "wasm-cpu",
    kvCells: TAB_ENGINE.kvCells,
    maxSessions: TAB_ENGINE.maxSessions,
    batchTokens: TAB_ENGINE.batchTokens,
    batchInvariant: true,
    // a tab may run on WebGPU, where attention may not be fused
    flashAttention: false,
  };
}

export interface VolunteerAsk {
  /** the ranges on offer (offeredRanges) */
  readonly candidates: readonly LayerRange[];
  /** what the tab's engine may hold */
  readonly capBytes: number;
  /** the tracker's nodes now */
  readonly nodes: readonly NodeState[];
  /** where the gateway serves this artifact's manifest and pieces */
  readonly artifactUrl: string;
}

export interface VolunteerAssignment {
  readonly model: string;
  readonly artifact: string;
  readonly nLayer: number;
  readonly range: { readonly start: number; readonly end: number };
  readonly hostsAlready: number;
  readonly fileBytes: number;
  readonly downloadBytes: number;
  readonly memory: RangeMemory;
  readonly memoryCapBytes: number;
  readonly kvCells: number;
  readonly maxSessions: number;
  readonly batchTokens: number;
  readonly manifestUrl: string;
  /** the gateway first, then peers that serve pieces of their own range */
  readonly sources: ReadonlyArray<{ readonly url: string; readonly layers?: { start: number; end: number } }>;
}

/**
 * The ranges a volunteer may be given: the split, or the one it asked for ("a:b"); a
 * TrackerError "invalid_argument" when that is no range of the model.
 */
export function offeredRanges(
  split: readonly LayerRange[],
  layers: string | undefined,
  nLayer: number,
): readonly LayerRange[] {
  if (!layers) return split;
  try {
    const [a, b] = layers.split(":").map(Number);
    return [layerRange(a, b, nLayer)];
  } catch (e) {
    throw new TrackerError("invalid_argument", `layers=${layers}: ${(e as Error).message}`);
  }
}

/** The assignment; a TrackerError "resource_exhausted" when no candidate fits the engine. */
export function volunteerAssignment(model: VolunteerModel, ask: VolunteerAsk): VolunteerAssignment {
  const m = model.manifest;
  const mine = ask.nodes.filter((n) => n.shard?.range && bytesToHex(n.shard.artifactSha256) === m.artifact);
  const hosted = mine.map((n) => ({ range: n.shard!.range!, live: n.live }));
  const a = assignRange(
    ask.candidates,
    hosted,
    // a tab may run on WebGPU, where attention may not be fused: its score matrix counts
    (r) =>
      shardMemory(model, r, TAB_ENGINE.kvCells, {
        maxSequences: TAB_ENGINE.maxSessions,
        batchTokens: TAB_ENGINE.batchTokens,
        batchInvariant: true,
        flashAttention: false,
      }),
    ask.capBytes,
  );
  if (!a.ok) throw new TrackerError("resource_exhausted", a.why);
  const peers = mine
    .filter((n) => n.live && n.shard!.artifactUrl)
    .map((n) => ({
      url: n.shard!.artifactUrl,
      layers: { start: n.shard!.range!.start, end: n.shard!.range!.end },
    }));
  return {
    model: model.name,
    artifact: m.artifact,
    nLayer: m.nLayer,
    range: { start: a.range.start, end: a.range.end },
    hostsAlready: a.hosts,
    fileBytes: m.fileSize,
    downloadBytes: shardBytes(m, a.range.start, a.range.end).bytes,
    memory: a.memory,
    memoryCapBytes: ask.capBytes,
    ...TAB_ENGINE,
    manifestUrl: `${ask.artifactUrl}/manifest`,
    sources: [{ url: ask.artifactUrl }, ...peers],
  };
}
