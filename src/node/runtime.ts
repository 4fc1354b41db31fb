// One node runtime for every host: a loaded engine becomes a serving ShardNode, reachable
// wherever the host listens, and (with a tracker) a member of the network. A Deno process,
// a browser tab or Node supply the same small set of adapters: the engine, a dialer, seam
// listeners and a way to reach the tracker.
import { create } from "@bufbuild/protobuf";
import { type BatchCost, BatchCostSchema, type NodeInfo } from "../gen/strata/seam/v1/seam_pb.ts";
import type { LayerRange } from "../engine/layer-range.ts";
import type { RangeEngine, ShardSpec } from "../engine/range-engine.ts";
import { costsPerToken, engineLabel } from "../engine/recipe.ts";
import { contextCap } from "../route/context-window.ts";
import type { SeamDialer, SeamServe } from "../seam/link.ts";
import { decideCohorts } from "../scheduler/cohort-rule.ts";
import { measureBatch, MEASURED_BATCH, measureDecode } from "./measure.ts";
import { joinTracker, type Membership, type MembershipEvents, type TrackerPort } from "./membership.ts";
import type { PrefixBudget } from "../scheduler/prefix-entries.ts";
import { ShardNode } from "./shard-node.ts";

/** Somewhere seams arrive: a gRPC server, a relay channel. */
export interface SeamListener {
  /** Starts serving; resolves with the hop URLs this listener is reachable at. */
  listen(serve: SeamServe, info: () => Promise<NodeInfo>): Promise<string[]>;
  close(): Promise<void>;
}

/** What a host hands the runtime. */
export interface NodeHost {
  readonly engine: RangeEngine;
  readonly dial: SeamDialer;
  readonly listeners: readonly SeamListener[];
  /** membership in a tracker (its route key verifies tickets); without one, `routeKey` must be set */
  readonly tracker?: TrackerPort;
  /** the node's memory cap, advertised so the tracker never overfills it (0: no cap) */
  readonly memoryCapBytes?: number;
}

export interface NodeSetup {
  readonly name: string;
  readonly artifactSha256: Uint8Array;
  /** KV cells as configured (advertised: the tracker fits ranges to memory with it) */
  readonly kvCells: number;
  /**
   * Most tokens one session may hold here: at most the model's trained context (and
   * MAX_CONTEXT_TOKENS), and never past what the engine gives one sequence (the whole pool,
   * or its own stream's share). Default: all of that.
   */
  readonly ctxSize?: number;
  readonly maxSessions: number;
  readonly batchTokens: number;
  /** a session with no step for this long is released */
  readonly leaseMs: number;
  /** a session opened that has taken no step this long is released (default 120 s) */
  readonly unusedSessionMs?: number;
  /** steps queued per session before its sender is pushed back */
  readonly maxQueuedPerSession?: number;
  /**
   * A route's decoding sessions take turns in cohorts (BatcherLimits.cohorts). Default: as the
   * node's own cost says, timed at load (scheduler/cohort-rule.ts): on where a batch costs much
   * more than one step (turns let shards overlap at little cost), off where it costs about the
   * same (a memory-bound range: two half batches would cost a shard twice one whole).
   */
  readonly cohorts?: boolean;
  /** verifies route tickets when there is no tracker to hand its key over */
  readonly routeKey?: CryptoKey;
  /** where this node serves its range's bytes of the artifact ("" = it does not) */
  readonly artifactUrl?: string;
  /**
   * Finished sessions' KV kept as prefix entries, for prompts that extend them (only where the
   * engine is batch-invariant: prefix-reuse.ts). Default: as many entries as sessions, in half
   * the KV pool; false: none.
   */
  readonly prefix?: PrefixBudget | false;
}

export interface RunningShard {
  readonly node: ShardNode;
  /** hop URLs the node is reachable at, preferred first */
  readonly urls: string[];
  /** measured decode rate for its range, one session */
  readonly tokensPerS: number;
  /** a step alone and in a batch as timed at load, and the cohorts chosen from them (NodeInfo) */
  readonly batchCost: BatchCost;
  readonly membership?: Membership;
  /** stops serving and leaves the tracker; the engine stays the host's to close */
  close(o?: { leave?: boolean }): Promise<void>;
}

/** What a node asks of its engine. */
export interface NodeEngineSettings {
  readonly modelPath: string;
  readonly range: LayerRange;
  readonly kvCells: number;
  readonly maxSessions: number;
  readonly batchTokens: number;
  readonly threads: number;
  readonly batchInvariant?: boolean;
  /** refuse a range past this many bytes (weights + KV + compute); advertised as the node's cap */
  readonly memoryCapBytes?: number;
}

/** A node's settings as its engine's spec: one engine sequence per session. */
export function nodeEngineSpec(n: NodeEngineSettings): ShardSpec {
  const { modelPath, range, kvCells, maxSessions, batchTokens, threads, batchInvariant, memoryCapBytes } = n;
  return {
    modelPath,
    range,
    kvCells,
    maxSequences: maxSessions,
    batchTokens,
    threads,
    batchInvariant,
    memoryCapBytes,
  };
}

export async function startShardNode(
  s: NodeSetup,
  host: NodeHost,
  events: MembershipEvents = {},
): Promise<RunningShard> {
  if (!s.routeKey && !host.tracker) {
    throw new Error("a node needs a route key or a tracker that hands one over");
  }
  const { engine } = host;
  const tokensPerS = await measureDecode(engine);
  const batch = await measureBatch(engine, Math.min(s.maxSessions, MEASURED_BATCH));
  // one step timed beside the batch, as warm as it; else the decode rate's
  const oneMs = batch?.oneMs ?? (tokensPerS > 0 ? 1000 / tokensPerS : 0);
  const cost = batch && { oneMs, batchMs: batch.ms, batchSessions: batch.sessions };
  const chosen = decideCohorts(s.cohorts, cost, costsPerToken(engine.backend));
  const batchCost = create(BatchCostSchema, {
    oneMs,
    batchMs: batch?.ms ?? 0,
    batchSessions: batch?.sessions ?? 0,
    cohorts: chosen.cohorts,
    cohortsBy: chosen.by,
  });
  // what the engine holds (llama.cpp pads each session's stream), and each session's share
  const memory = await engine.memory();
  const sessionCells = Math.min(
    contextCap(engine.facts.nCtxTrain, memory.kvCellsPerSequence),
    s.ctxSize ?? Infinity,
  );
  // (not Promise.withResolvers: Node 20 lacks it)
  let keyFromTracker!: (k: CryptoKey) => void;
  const trackerKey = new Promise<CryptoKey>((r) => (keyFromTracker = r));
  const node = new ShardNode(engine, {
    nodeId: s.name,
    artifactSha256: s.artifactSha256,
    routeKey: s.routeKey ?? trackerKey,
    dial: host.dial,
    limits: {
      maxBatchTokens: s.batchTokens,
      maxQueuedPerSession: s.maxQueuedPerSession ?? 64,
      kvCells: memory.kvCells,
      kvCellsPerSession: sessionCells,
      cohorts: chosen.cohorts,
      prefix: s.prefix === false
        ? undefined
        : (s.prefix ?? { entries: s.maxSessions, cells: Math.floor(memory.kvCells / 2) }),
    },
    leaseMs: s.leaseMs,
    unusedMs: s.unusedSessionMs,
  });
  const info = async () => {
    const i = await node.info();
    i.batchCost = batchCost;
    return i;
  };
  const urls: string[] = [];
  for (const l of host.listeners) urls.push(...await l.listen(node.serve, info));
  let membership: Membership | undefined;
  if (host.tracker) {
    membership = await joinTracker(
      host.tracker,
      urls,
      {
        artifactSha256: s.artifactSha256,
        range: { start: engine.facts.range.start, end: engine.facts.range.end },
        engine: engineLabel(engine),
        kvCells: s.kvCells,
        sessionCells,
        maxSessions: s.maxSessions,
        decodeTokensPerS: tokensPerS,
        memoryCapBytes: BigInt(host.memoryCapBytes ?? 0),
        artifactUrl: s.artifactUrl ?? "",
      },
      () => node,
      events,
    );
    keyFromTracker(membership.routeKey);
  }
  return {
    node,
    urls,
    tokensPerS,
    batchCost,
    membership,
    close: async ({ leave = false } = {}) => {
      await membership?.stop({ leave });
      await node.close();
      for (const l of host.listeners) await l.close();
    },
  };
}
