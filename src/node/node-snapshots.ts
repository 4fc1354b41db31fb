// A shard node's side of KV snapshots (kv-snapshot.ts): it lends them its batcher's sessions and
// prefix entries, serves SNAPSHOT frames (a driver's request to send a session's KV on, a peer's
// chunks to take), hands its entries over when it drains, and counts what went and came.
import { create } from "@bufbuild/protobuf";
import { type Hop, PrefixBlocksSchema, type SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";
import { hexToBytes } from "../bytes/hex.ts";
import type { RangeEngine } from "../engine/range-engine.ts";
import type { Batcher } from "../scheduler/batcher.ts";
import { SeamError } from "../seam/errors.ts";
import type { SeamDialer } from "../seam/link.ts";
import { checkAddressed } from "./frame-checks.ts";
import {
  carriesState,
  pushSnapshot,
  sendSnapshot,
  SnapshotIntake,
  type SnapshotNode,
} from "./kv-snapshot.ts";
import type { NodeCounters } from "./node-info.ts";
import { replyTo } from "./replies.ts";
import type { SessionTable } from "./session-table.ts";

/** What snapshots ask of the node that holds them. */
export interface SnapshotHost {
  readonly nodeId: string;
  readonly artifact: Uint8Array;
  readonly dial: SeamDialer;
  readonly engine: RangeEngine;
  readonly batcher: Batcher;
  readonly table: SessionTable;
  readonly counters: NodeCounters;
  /** whether this shard keeps and reuses prefixes */
  reuses(): Promise<boolean>;
  checkTicket(f: SeamFrame): Promise<void>;
}

export class NodeSnapshots {
  constructor(readonly host: SnapshotHost) {}

  /** What the node lends the KV snapshots it sends and takes (kv-snapshot.ts). */
  #lent?: SnapshotNode;
  get #node(): SnapshotNode {
    const { engine, batcher } = this.host;
    const range = engine.facts.range;
    return this.#lent ??= {
      artifact: this.host.artifact,
      recipe: engine.recipe,
      range: { start: range.start, end: range.end },
      dial: (url) => this.host.dial(url),
      exportSession: (id) => batcher.exportSession(id),
      importEntry: (key, state, positions) => batcher.importEntry(key, state, positions),
      maxStateBytes: async (positions) => {
        const m = await engine.memory();
        // K and V of every layer here per cell, its position and sequence, and headers
        return Math.ceil((m.kvBytes / Math.max(1, m.kvCells)) * positions * 1.05) + (1 << 20);
      },
    };
  }

  /** What takes one stream's snapshot chunks. */
  intake(): SnapshotIntake {
    return new SnapshotIntake(this.#node, (t) => this.host.checkTicket(t));
  }

  /**
   * A SNAPSHOT frame: a driver asks this shard to send a session's KV to another node of its
   * range, or a peer sends one here, chunk by chunk. Only where prefixes are kept and reused.
   */
  async serve(f: SeamFrame, reply: (f: SeamFrame) => void, intake: () => SnapshotIntake): Promise<void> {
    const { engine, counters } = this.host;
    checkAddressed(f, { artifact: this.host.artifact, range: engine.facts.range });
    if (!await this.host.reuses()) throw new SeamError("malformed", "this node keeps no prefix entries");
    if (carriesState(f)) {
      // llama.cpp's state reader refuses a malformed state by throwing: the WASM build has no
      // exceptions, so there it would abort the engine instead
      if (engine.kind !== "native") {
        throw new SeamError("malformed", "a WASM engine takes no KV snapshots");
      }
      const done = await intake().take(f);
      if (done) {
        counters.snapshotsTaken++;
        reply(done);
      }
      return;
    }
    await this.host.checkTicket(f);
    const s = this.host.table.get(f.sessionId);
    if (!s || s.closed || s.epoch !== f.routeEpoch) {
      throw new SeamError(
        "unknown_session",
        `session ${f.sessionId} is not open here at epoch ${f.routeEpoch}`,
      );
    }
    const positions = await sendSnapshot(this.#node, {
      id: s.id,
      epoch: s.epoch,
      held: s.nextPos,
      lineage: s.prefixLineage === undefined ? undefined : s.open.prefix?.lineage,
    }, f);
    counters.snapshotsSent++;
    reply(replyTo(f, { cacheResult: positions }));
  }

  /** A draining node's prefix entries, pushed to `to` until `until` (ShardNode.handOver). */
  async handOver(to: Hop, until: number): Promise<number> {
    if (!await this.host.reuses()) return 0;
    let taken = 0;
    for await (const e of this.host.batcher.exportEntries()) {
      if (Date.now() >= until) break;
      const key = create(PrefixBlocksSchema, {
        blockTokens: e.key.blockTokens,
        blocks: e.key.blocks.map(hexToBytes),
        lineage: hexToBytes(e.key.lineage),
      });
      try {
        await pushSnapshot(
          this.#node,
          to,
          key,
          e.cells,
          e.state,
          `${this.host.nodeId}/handover/${taken}`,
          Math.min(60_000, Math.max(1_000, until - Date.now())),
        );
        taken++;
        this.host.counters.snapshotsSent++;
      } catch {
        // the receiver's refusal (full, another recipe): the next entry may still fit
      }
    }
    return taken;
  }
}
