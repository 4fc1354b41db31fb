// KV snapshots between two nodes of one layer range (Phase SNAPSHOT). A shard of a route, asked by
// the session's driver, sends the session's first positions to another node of its range (a hop
// the tracker ticketed for it); that node checks every chunk and the whole state, and keeps it as
// a prefix entry, which a later OPEN with the same blocks and lineage (a repair's, a next turn's)
// starts from. Neither side trusts the other's sizes.
import { create } from "@bufbuild/protobuf";
import {
  type Hop,
  Phase,
  type PrefixBlocks,
  PrefixBlocksSchema,
  type SeamFrame,
  SeamFrameSchema,
  type Snapshot,
} from "../gen/strata/seam/v1/seam_pb.ts";
import type { PrefixKey } from "../scheduler/prefix-entries.ts";
import { crc32c } from "../seam/crc32c.ts";
import { SeamError } from "../seam/errors.ts";
import { firstAnswer } from "../seam/first-answer.ts";
import { SCHEMA_VERSION, SNAPSHOT_CHUNK_BYTES } from "../seam/limits.ts";
import type { SeamLink } from "../seam/link.ts";
import { ticketClaims } from "../route/ticket.ts";
import { prefixKeyOf } from "./prefix-reuse.ts";
import { replyTo } from "./replies.ts";

/** How long a sender waits for the receiver to take the whole snapshot. */
const SEND_TIMEOUT_MS = 60_000;

/** What a node lends the snapshots it sends and takes. */
export interface SnapshotNode {
  readonly artifact: Uint8Array;
  readonly recipe: Uint8Array;
  readonly range: { readonly start: number; readonly end: number };
  dial(url: string): SeamLink;
  /** the session's KV as its engine's bytes (between its steps) */
  exportSession(sessionId: string): Promise<Uint8Array>;
  /** most bytes a state of `positions` positions of this engine may take */
  maxStateBytes(positions: number): Promise<number>;
  /** keeps a state as a prefix entry of `positions` positions under `key`; throws when it cannot */
  importEntry(key: PrefixKey, state: Uint8Array, positions: number): Promise<void>;
}

/** The session a SNAPSHOT request names, as its shard holds it. */
export interface SnapshotSource {
  readonly id: string;
  readonly epoch: bigint;
  /** positions it holds */
  readonly held: number;
  /** the lineage it was opened with (none: it was opened without prefix blocks) */
  readonly lineage?: Uint8Array;
}

const sha256 = async (b: Uint8Array) =>
  new Uint8Array(await crypto.subtle.digest("SHA-256", b as Uint8Array<ArrayBuffer>));

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * A driver's SNAPSHOT request, carried out: the session's first `snapshot.positions` positions go
 * to the hop `open.next_hops[0]` names, under the request's blocks. Resolves with the positions
 * the receiver took; throws its refusal (or why nothing was sent).
 */
export async function sendSnapshot(node: SnapshotNode, s: SnapshotSource, f: SeamFrame): Promise<number> {
  const positions = f.snapshot?.positions ?? 0;
  const target = f.open?.nextHops[0];
  if (!target || !f.keep) throw new SeamError("malformed", "a snapshot request names a hop and its blocks");
  if (target.range?.start !== node.range.start || target.range?.end !== node.range.end) {
    throw new SeamError("wrong_shard", "a snapshot goes to a node of the same layer range");
  }
  if (s.lineage === undefined) {
    throw new SeamError("malformed", `session ${s.id} was opened without prefix blocks: nothing keys its KV`);
  }
  const key = create(PrefixBlocksSchema, { ...f.keep, lineage: s.lineage });
  prefixKeyOf(key, s.lineage); // checked here, before any work
  if (!(positions > 0 && positions === f.keep.blocks.length * f.keep.blockTokens && positions <= s.held)) {
    throw new SeamError(
      "bad_position",
      `a snapshot of ${positions} positions (${f.keep.blocks.length} blocks) of a session that holds ${s.held}`,
    );
  }
  const state = await node.exportSession(s.id);
  if (state.length === 0) throw new SeamError("unknown_session", `session ${s.id} holds no KV here`);
  return await pushSnapshot(node, target, key, positions, state, f.workId);
}

/**
 * Sends `state` (an engine's sequence state holding at least `positions` positions) to the node
 * `target` names, to keep under `key`: in chunks, each with its CRC-32C, the whole with its size and
 * SHA-256, addressed by the work the target's ticket names. Resolves with the positions it took.
 */
export async function pushSnapshot(
  node: Pick<SnapshotNode, "artifact" | "recipe" | "dial">,
  target: Hop,
  key: PrefixBlocks,
  positions: number,
  state: Uint8Array,
  workId: string,
  timeoutMs = SEND_TIMEOUT_MS,
): Promise<number> {
  // the receiver's ticket names the work the snapshot belongs to there
  const claims = ticketClaims(target.routeTicket);
  const digest = await sha256(state);
  const count = Math.ceil(state.length / SNAPSHOT_CHUNK_BYTES);
  const link = node.dial(target.url);
  try {
    for (let i = 0; i < count; i++) {
      const chunk = state.subarray(i * SNAPSHOT_CHUNK_BYTES, (i + 1) * SNAPSHOT_CHUNK_BYTES);
      link.send(create(SeamFrameSchema, {
        schemaVersion: SCHEMA_VERSION,
        workId: `${workId}/${i}`,
        sessionId: claims.sessionId,
        routeEpoch: claims.routeEpoch,
        artifactSha256: node.artifact,
        recipeFingerprint: node.recipe,
        range: target.range,
        phase: Phase.SNAPSHOT,
        chunkIndex: i,
        chunkCount: count,
        // the receiver's ticket (the tracker's word that this work may use it)
        open: i === 0 ? { routeTicket: target.routeTicket } : undefined,
        keep: key,
        snapshot: {
          positions,
          stateBytes: BigInt(state.length),
          sha256: digest,
          chunk,
          crc32c: crc32c(chunk),
        },
      }));
    }
    return (await firstAnswer(link, timeoutMs, target.url)).cacheResult;
  } finally {
    link.close();
  }
}

/**
 * One stream's incoming snapshot: chunks in order, each checked, then the whole. A refused
 * chunk ends the snapshot (nothing is kept); the stream may start another.
 */
export class SnapshotIntake {
  #taking?: { first: Snapshot; key: PrefixKey; state: Uint8Array; at: number; next: number; count: number };

  constructor(
    private readonly node: SnapshotNode,
    private readonly checkTicket: (f: SeamFrame) => Promise<void>,
  ) {}

  /** the snapshot refused: its later chunks are let go without a word (the sender heard why) */
  #dropping = false;

  /** Takes one chunk: undefined until the last, then the reply (the positions kept). */
  async take(f: SeamFrame): Promise<SeamFrame | undefined> {
    if (this.#dropping && f.chunkIndex !== 0) return undefined;
    this.#dropping = false;
    try {
      return await this.#take(f);
    } catch (e) {
      this.#taking = undefined;
      this.#dropping = true;
      throw e;
    }
  }

  async #take(f: SeamFrame): Promise<SeamFrame | undefined> {
    const snap = f.snapshot;
    if (!snap || !f.keep) {
      throw new SeamError("malformed", "a snapshot chunk carries its snapshot and blocks");
    }
    if (!sameBytes(f.recipeFingerprint, this.node.recipe)) {
      // another build's KV would not continue this engine's computation bit for bit
      throw new SeamError("wrong_recipe", "a snapshot from another engine recipe");
    }
    if (f.chunkIndex === 0) {
      await this.checkTicket(f);
      const key = prefixKeyOf(f.keep, f.keep.lineage);
      const positions = snap.positions;
      if (!(positions > 0 && positions === f.keep.blocks.length * f.keep.blockTokens)) {
        throw new SeamError("malformed", `${positions} positions for ${f.keep.blocks.length} blocks`);
      }
      const most = await this.node.maxStateBytes(positions);
      const bytes = Number(snap.stateBytes);
      if (!(bytes > 0 && bytes <= most)) {
        throw new SeamError(
          "too_large",
          `a snapshot of ${bytes} bytes for ${positions} positions (at most ${most})`,
        );
      }
      const count = Math.ceil(bytes / SNAPSHOT_CHUNK_BYTES);
      if (f.chunkCount !== count || snap.sha256.length !== 32) {
        throw new SeamError("malformed", `${f.chunkCount} chunks for ${bytes} bytes`);
      }
      this.#taking = { first: snap, key, state: new Uint8Array(bytes), at: 0, next: 0, count };
    }
    const t = this.#taking;
    if (!t || f.chunkIndex !== t.next || f.chunkCount !== t.count) {
      throw new SeamError("malformed", `snapshot chunk ${f.chunkIndex} of ${f.chunkCount} out of order`);
    }
    if (
      snap.positions !== t.first.positions || snap.stateBytes !== t.first.stateBytes ||
      !sameBytes(snap.sha256, t.first.sha256)
    ) {
      throw new SeamError("malformed", "a snapshot's chunks disagree about it");
    }
    if (crc32c(snap.chunk) !== snap.crc32c) {
      throw new SeamError("checksum", `snapshot chunk ${f.chunkIndex} does not match its CRC-32C`);
    }
    if (t.at + snap.chunk.length > t.state.length) {
      throw new SeamError("too_large", "a snapshot past its size");
    }
    t.state.set(snap.chunk, t.at);
    t.at += snap.chunk.length;
    t.next++;
    if (t.next < t.count) return undefined;
    this.#taking = undefined;
    if (t.at !== t.state.length) {
      throw new SeamError("malformed", `a snapshot of ${t.at} of its ${t.state.length} bytes`);
    }
    if (!sameBytes(await sha256(t.state), t.first.sha256)) {
      throw new SeamError("checksum", "the snapshot does not match its SHA-256");
    }
    await this.node.importEntry(t.key, t.state, t.first.positions);
    return replyTo(f, { cacheResult: t.first.positions });
  }
}

/** A SNAPSHOT frame that carries state (from a peer), not a driver's request for one. */
export const carriesState = (f: SeamFrame): boolean => (f.snapshot?.stateBytes ?? 0n) > 0n;
