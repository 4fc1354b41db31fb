// Simulated nodes for `strata bench tracker`: each asks the tracker where to go (its memory
// cap), registers that range, beats, follows a new placement, serves the sessions routes give
// it (held for as long as the route's latency model says) and leaves, over the trackers' real
// protocol. No engine: the one seam endpoint they share answers the admission probes from the
// model's reference. Thousands share a few HTTP/2 connections, and one timer drives all beats.
import { xorshift32 } from "../../../src/model/seeded.ts";
import type { Client } from "@connectrpc/connect";
import type { TrackerService } from "../../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { hexToBytes } from "../../../src/bytes/hex.ts";

/** What one simulated node is: drawn once, kept for its life. */
export interface AgentSpec {
  readonly name: string;
  /** the memory cap it advertises (it holds this many of the model's layers, by the estimate) */
  readonly capBytes: number;
  readonly capLayers: number;
  /** decode speed over one layer, one session: layer-steps a second */
  readonly layerRate: number;
  /** one-way latency to its next hop, ms */
  readonly latencyMs: number;
}

export interface Agent {
  readonly spec: AgentSpec;
  range?: { start: number; end: number };
  admitted: boolean;
  alive: boolean;
  /** sessions open here, by id, until when (ms) */
  readonly sessions: Map<string, number>;
  nextBeat: number;
  beating: boolean;
  /** when the last heartbeat the tracker answered was sent (ms) */
  lastBeat: number;
}

export const KV_CELLS = 4096;
export const MAX_SESSIONS = 8;
export const BATCH_TOKENS = 256;
/** Heartbeats are filed in slots this long. */
const SLOT_MS = 25;
/** Heartbeats waiting for an answer at once, over all simulated nodes. */
const MAX_BEATS_IN_FLIGHT = 4096;

/** What a simulated node says of itself when it asks where to go. */
export const placeAsk = (spec: AgentSpec, artifact: Uint8Array) => ({
  node: spec.name,
  artifactSha256: artifact,
  memoryCapBytes: BigInt(spec.capBytes),
  engine: "native-cpu",
  kvCells: KV_CELLS,
  maxSessions: MAX_SESSIONS,
  batchTokens: BATCH_TOKENS,
  batchInvariant: true,
  flashAttention: true,
});

/** The decode rate a node advertises for a range: its layer rate over the range's layers. */
export const rangeRate = (a: AgentSpec, r: { start: number; end: number }) => a.layerRate / (r.end - r.start);

export interface AgentsOptions {
  readonly clients: ReadonlyArray<Client<typeof TrackerService>>;
  readonly token: string;
  readonly artifact: string;
  /** the simulated nodes' seam endpoint */
  readonly url: string;
  readonly leaseMs: number;
}

export class Agents {
  readonly all = new Map<string, Agent>();
  readonly counts = {
    registered: 0,
    placed: 0,
    moved: 0,
    beats: 0,
    beatErrors: 0,
    left: 0,
    crashed: 0,
    joinErrors: 0,
  };
  /** why joins failed, by message */
  readonly joinFailures = new Map<string, number>();
  readonly #timer: ReturnType<typeof setInterval>;
  readonly #artifact: Uint8Array;
  #inFlight = 0;
  /** agents by the time slot of their next beat; the first slot not yet looked at */
  readonly #due = new Map<number, Agent[]>();
  #nextSlot: number | undefined;
  /** how late each beat went out (ms past due), and how long the tracker took to answer it */
  readonly beatLateMs: number[] = [];
  readonly beatMs: number[] = [];

  constructor(readonly o: AgentsOptions) {
    this.#artifact = hexToBytes(o.artifact);
    this.#timer = setInterval(() => this.#tick(), 25);
  }

  /** The client an agent talks to first: agents spread over the replicas. */
  #client(a: Agent) {
    let h = 0;
    for (let i = 0; i < a.spec.name.length; i++) h = (h * 31 + a.spec.name.charCodeAt(i)) >>> 0;
    return this.o.clients[h % this.o.clients.length];
  }

  /** Asks where to go, registers there, and starts beating. */
  async join(spec: AgentSpec): Promise<void> {
    const a: Agent = {
      spec,
      admitted: false,
      alive: true,
      sessions: new Map(),
      nextBeat: 0,
      beating: false,
      lastBeat: 0,
    };
    this.all.set(spec.name, a);
    try {
      const placed = await this.#client(a).place(
        { token: this.o.token, ...placeAsk(spec, this.#artifact) },
        { timeoutMs: 30_000 },
      );
      this.counts.placed++;
      await this.#register(a, { start: placed.range!.start, end: placed.range!.end });
      a.lastBeat = Date.now();
      this.#schedule(a, a.lastBeat + this.o.leaseMs / 3);
    } catch (e) {
      const why = (e as { rawMessage?: string }).rawMessage ?? String(e);
      this.joinFailures.set(why, (this.joinFailures.get(why) ?? 0) + 1);
      this.counts.joinErrors++;
      a.alive = false;
      this.all.delete(spec.name);
    }
  }

  async #register(a: Agent, range: { start: number; end: number }): Promise<void> {
    a.range = range;
    a.admitted = false;
    await this.#client(a).register({
      token: this.o.token,
      node: a.spec.name,
      urls: [this.o.url],
      shard: {
        artifactSha256: this.#artifact,
        range,
        engine: "native-cpu",
        kvCells: KV_CELLS,
        maxSessions: MAX_SESSIONS,
        decodeTokensPerS: rangeRate(a.spec, range),
        memoryCapBytes: BigInt(a.spec.capBytes),
        sessionCells: KV_CELLS / MAX_SESSIONS,
      },
    }, { timeoutMs: 30_000 });
    this.counts.registered++;
  }

  /** Leaves: politely (Leave), or by vanishing (its lease runs out). */
  async leave(name: string, polite: boolean): Promise<void> {
    const a = this.all.get(name);
    if (!a || !a.alive) return;
    a.alive = false;
    this.all.delete(name);
    if (!polite) {
      this.counts.crashed++;
      return;
    }
    this.counts.left++;
    await this.#client(a).leave({ token: this.o.token, node: name }, { timeoutMs: 10_000 }).catch(() => {});
  }

  /** A route handed out through these nodes: each holds the session until `until`. */
  serve(nodes: readonly string[], sessionId: string, until: number): void {
    for (const n of nodes) this.all.get(n)?.sessions.set(sessionId, until);
  }

  /** An agent's next beat, filed under its time slot. */
  #schedule(a: Agent, at: number): void {
    a.nextBeat = at;
    const slot = Math.floor(at / SLOT_MS);
    const due = this.#due.get(slot);
    if (due) due.push(a);
    else this.#due.set(slot, [a]);
  }

  /** Beats that are due, a bounded number at a time (lateness is measured, beatLateMs): only
   *  the slots come due are looked at, not every agent (a hundred thousand of them). */
  #tick(): void {
    const now = Date.now();
    const last = Math.floor(now / SLOT_MS);
    this.#nextSlot ??= last;
    for (; this.#nextSlot <= last; this.#nextSlot++) {
      const due = this.#due.get(this.#nextSlot) ?? [];
      while (due.length > 0) {
        if (this.#inFlight >= MAX_BEATS_IN_FLIGHT) return;
        const a = due.pop()!;
        // filed again since (it beat, or re-registered): its own slot has it
        if (!a.alive || a.beating || Math.floor(a.nextBeat / SLOT_MS) !== this.#nextSlot) continue;
        void this.#beat(a, now);
      }
      this.#due.delete(this.#nextSlot);
    }
  }

  async #beat(a: Agent, now: number): Promise<void> {
    a.beating = true;
    this.#inFlight++;
    this.beatLateMs.push(now - a.nextBeat);
    this.#schedule(a, now + this.o.leaseMs / 3);
    for (const [id, until] of a.sessions) if (until <= now) a.sessions.delete(id);
    try {
      const r = await this.#client(a).heartbeat({
        token: this.o.token,
        node: a.spec.name,
        sessions: a.sessions.size,
        sessionIds: [...a.sessions.keys()],
      }, { timeoutMs: this.o.leaseMs });
      this.counts.beats++;
      this.beatMs.push(Date.now() - now);
      a.lastBeat = now;
      if (!a.alive) return;
      if (!r.known) await this.#register(a, a.range!);
      else if (r.place) {
        this.counts.moved++;
        await this.#register(a, { start: r.place.start, end: r.place.end });
      } else a.admitted = r.admission === "admitted";
    } catch {
      this.counts.beatErrors++;
    } finally {
      a.beating = false;
      this.#inFlight--;
    }
  }

  close(): void {
    clearInterval(this.#timer);
  }
}

/** The stated distributions, seeded. */
export function drawAgents(
  n: number,
  o: { readonly seed: number; readonly layers: number },
  capOf: (layers: number) => number,
  from = 0,
) {
  // the same network for the same seed
  const next = xorshift32(o.seed * 2654435761 + from * 40503);
  const u = () => (next() + 0.5) / 2 ** 32;
  const logU = (lo: number, hi: number) => lo * (hi / lo) ** u();
  return Array.from({ length: n }, (_, i): AgentSpec => {
    // a node's cap holds 10 % to 50 % of the model's layers (log-uniform): none holds it all
    const capLayers = Math.max(1, Math.round(o.layers * logU(0.1, 0.5)));
    return {
      name: `sim${from + i}`,
      capBytes: capOf(capLayers),
      capLayers,
      // one layer, one session: 100 to 2,000 steps a second (log-uniform)
      layerRate: logU(100, 2000),
      // one way to the next hop: 1 to 40 ms (log-uniform)
      latencyMs: logU(1, 40),
    };
  });
}
