import { afterEach, describe, expect, it, vi } from "vitest";
import { FakeEngine } from "../fakes/fake-engine.ts";
import { MemorySeams } from "../fakes/memory-seams.ts";
import { ARTIFACT, publicKeyBytes, routeKey, ticketFor } from "../fakes/route-keys.ts";
import { openFrame } from "../fakes/frames.ts";
import { Inbox } from "../fakes/inbox.ts";
import type { NodeLoad, ShardAdvert, TrackerPort } from "../../src/node/membership.ts";
import { type RunningShard, type SeamListener, startShardNode } from "../../src/node/runtime.ts";

// The one node runtime against a fake engine, in-memory seams and a tracker port that records
// what the node told it: what a host supplies is all it takes.

class RecordingTracker implements TrackerPort {
  readonly registrations: Array<{ urls: string[]; shard: ShardAdvert }> = [];
  readonly beats: NodeLoad[] = [];
  left = 0;
  closed = 0;
  /** the next heartbeat's answer */
  known = true;
  admission = "admitted";
  constructor(readonly publicKey: Uint8Array) {}
  register(urls: string[], shard: ShardAdvert) {
    this.registrations.push({ urls, shard });
    return Promise.resolve({ leaseMs: 3000, routePublicKey: this.publicKey });
  }
  heartbeat(load: NodeLoad) {
    this.beats.push(load);
    return Promise.resolve({ known: this.known, admission: this.admission });
  }
  leave() {
    this.left++;
    return Promise.resolve();
  }
  close() {
    this.closed++;
  }
}

const listenerAt = (seams: MemorySeams, url: string): SeamListener & { closed: boolean } => ({
  closed: false,
  listen(serve) {
    seams.listen(url, serve);
    return Promise.resolve([url]);
  },
  close() {
    this.closed = true;
    return Promise.resolve();
  },
});

const running: RunningShard[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const r of running.splice(0)) await r.close();
});

async function start(tracker?: RecordingTracker) {
  const engine = new FakeEngine({
    range: { start: 0, end: 4 },
    kvCells: 256,
    maxSequences: 4,
  });
  const seams = new MemorySeams();
  const listener = listenerAt(seams, "http://node-a");
  const r = await startShardNode({
    name: "node-a",
    artifactSha256: ARTIFACT,
    kvCells: 256,
    // a session may hold 100 of the pool's 256 cells
    ctxSize: 100,
    maxSessions: 4,
    batchTokens: 64,
    leaseMs: 60_000,
    routeKey: tracker ? undefined : (await routeKey()).publicKey,
    artifactUrl: "http://node-a/artifacts/x",
  }, { engine, dial: seams.dial, listeners: [listener], tracker, memoryCapBytes: 4096 });
  running.push(r);
  return { r, engine, seams, listener };
}

describe("the one node runtime", () => {
  it("advertises the engine's shard, labels and cells, and serves where its listeners are", async () => {
    const tracker = new RecordingTracker(await publicKeyBytes());
    const { r, listener } = await start(tracker);
    expect(r.urls).toEqual(["http://node-a"]);
    expect(r.tokensPerS).toBeGreaterThan(0);
    expect(tracker.registrations).toHaveLength(1);
    const { urls, shard } = tracker.registrations[0];
    expect(urls).toEqual(["http://node-a"]);
    expect(shard).toMatchObject({
      artifactSha256: ARTIFACT,
      range: { start: 0, end: 4 },
      engine: "fake",
      kvCells: 256,
      sessionCells: 100,
      maxSessions: 4,
      memoryCapBytes: 4096n,
      artifactUrl: "http://node-a/artifacts/x",
    });
    await r.close({ leave: true });
    running.length = 0;
    expect([tracker.left, tracker.closed, listener.closed]).toEqual([1, 1, true]);
  });

  it("verifies tickets with the key the tracker handed over", async () => {
    const tracker = new RecordingTracker(await publicKeyBytes());
    const { seams } = await start(tracker);
    const to = { sessionId: "s", range: { start: 0, end: 4 } };
    const link = seams.dial("http://node-a");
    const replies = new Inbox(link.replies);
    link.send(openFrame(to, { ticket: await ticketFor({ ...to, epoch: 1n }), kvCells: 16 }));
    const opened = await replies.until((f) => f.stepId === 1n);
    expect(opened.status).toBeUndefined();
    link.close();
  });

  it("heartbeats report the sessions open, register again when forgotten, and say the admission", async () => {
    const tracker = new RecordingTracker(await publicKeyBytes());
    tracker.admission = "pending";
    const seen: string[] = [];
    const engine = new FakeEngine({ range: { start: 0, end: 4 } });
    const seams = new MemorySeams();
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const r = await startShardNode(
      {
        name: "node-b",
        artifactSha256: ARTIFACT,
        kvCells: 256,
        maxSessions: 8,
        batchTokens: 64,
        leaseMs: 60_000,
      },
      { engine, dial: seams.dial, listeners: [listenerAt(seams, "http://node-b")], tracker },
      {
        onAdmission: (a) => seen.push(a),
      },
    );
    running.push(r);
    // the first beat goes at once
    await vi.waitFor(() => expect(tracker.beats).toHaveLength(1));
    // no traffic yet: no rate measured on it (0: the tracker keeps the one measured at load)
    expect(tracker.beats[0]).toEqual({
      sessions: 0,
      sessionIds: [],
      kvCellsUsed: 0,
      queued: 0,
      decodeTokensPerS: 0,
    });
    // a tracker that restarted forgot the node: the next beat registers it again
    tracker.known = false;
    tracker.admission = "admitted";
    await vi.advanceTimersByTimeAsync(1000);
    await vi.waitFor(() => expect(tracker.registrations).toHaveLength(2));
    expect(seen).toEqual(["pending", "admitted"]);
    expect(r.membership?.admission).toBe("admitted");
  });

  it("refuses to start with neither a route key nor a tracker", async () => {
    const seams = new MemorySeams();
    await expect(startShardNode({
      name: "n",
      artifactSha256: ARTIFACT,
      kvCells: 256,
      maxSessions: 1,
      batchTokens: 64,
      leaseMs: 1000,
    }, { engine: new FakeEngine(), dial: seams.dial, listeners: [] })).rejects.toThrow(
      /route key or a tracker/,
    );
  });
});
