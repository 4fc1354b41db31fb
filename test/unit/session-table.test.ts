// The shard node's session table on its own, without a node or an engine: how sessions leave
// it (parked, adopted, dropped, expired) and the rebuild history that follows them.
import { create } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it, vi } from "vitest";
import { OpenSchema, Phase, type SeamFrame, SeamFrameSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { NodeSession } from "../../src/node/node-session.ts";
import { RebuildHistory } from "../../src/node/rebuild-history.ts";
import { expiryPeriodMs, type SessionKv, SessionTable } from "../../src/node/session-table.ts";
import type { SeamLink } from "../../src/seam/link.ts";
import { packTensor } from "../../src/seam/tensor.ts";

afterEach(() => {
  vi.useRealTimers();
});

/** The batcher's side, as calls: what was released, trimmed; which ids go idle next. */
class FakeKv implements SessionKv {
  readonly released: Array<[string, string]> = [];
  readonly trimmed: Array<[string, number]> = [];
  idle: string[] = [];
  trimFails = false;
  release(id: string, why = "released"): Promise<void> {
    this.released.push([id, why]);
    return Promise.resolve();
  }
  trim(id: string, pos: number): Promise<void> {
    if (this.trimFails) return Promise.reject(new Error("engine refused"));
    this.trimmed.push([id, pos]);
    return Promise.resolve();
  }
  expireIdle(): Promise<string[]> {
    const ids = this.idle;
    this.idle = [];
    return Promise.resolve(ids);
  }
}

/** A session with the replies it was sent and, where it forwards, a downstream that notes its abort. */
function session(id: string, epoch = 1n, o: { parkOnLoss?: boolean; downstream?: boolean } = {}) {
  const replies: SeamFrame[] = [];
  const s = new NodeSession(
    id,
    epoch,
    `w-${id}`,
    create(OpenSchema, { parkOnLoss: o.parkOnLoss ?? false }),
    (f) => replies.push(f),
    new Uint8Array(0),
    "memory",
  );
  const link = { aborted: undefined as string | undefined };
  if (o.downstream) {
    s.downstream = { abort: (why: string) => link.aborted = why } as unknown as SeamLink;
  }
  return { s, replies, link };
}

const openAt = (id: string, epoch: bigint) => create(SeamFrameSchema, { sessionId: id, routeEpoch: epoch });
const rows = (n: number, width = 4) => packTensor("hidden_states", new Float32Array(n * width), [n, width]);

function table(times: { leaseMs?: number; unusedMs?: number; parkMs?: number } = {}, budget?: number) {
  const kv = new FakeKv();
  const history = new RebuildHistory(budget);
  return { kv, history, t: new SessionTable(kv, history, { leaseMs: 60_000, ...times }) };
}

describe("session table: expiry", () => {
  it("looks for sessions to let go at a quarter of its shortest time, between 250 ms and a minute", () => {
    expect(expiryPeriodMs({ leaseMs: 60_000 })).toBe(2_500); // the 10 s park time, by default
    expect(expiryPeriodMs({ leaseMs: 4_000, parkMs: 0 })).toBe(250);
    expect(expiryPeriodMs({ leaseMs: 1e9, parkMs: 1e9, unusedMs: 1e9 })).toBe(60_000);
    expect(expiryPeriodMs({ leaseMs: 1e9, parkMs: 1e9 })).toBe(30_000); // unused: 120 s by default
  });

  it("lets a session go that was opened and never stepped, tells it so, and refuses its OPEN again", async () => {
    vi.useFakeTimers();
    const { kv, t } = table({ unusedMs: 2_000 });
    const idle = session("idle");
    const used = session("used");
    used.s.nextPos = 3;
    t.add(idle.s);
    t.add(used.s);
    vi.advanceTimersByTime(2_000);
    await t.expire();
    expect(t.ids().sort()).toEqual(["idle", "used"]);
    vi.advanceTimersByTime(1);
    await t.expire();
    expect(t.ids()).toEqual(["used"]);
    expect(idle.replies.map((f) => [f.phase, f.status?.code, f.status?.message])).toEqual([
      [Phase.CANCEL, "expired", "session idle opened and unused for 2000 ms"],
    ]);
    expect(kv.released).toEqual([["idle", "opened and never used"]]);
    // remembered against replays: the same epoch again is refused, a newer one is not
    expect(() => t.checkEpoch(openAt("idle", 1n))).toThrow("session idle ended here at epoch 1");
    expect(t.checkEpoch(openAt("idle", 2n))).toBeUndefined();
  });

  it("ends a session the batcher found idle past its lease without releasing its KV twice", async () => {
    const { kv, history, t } = table({ leaseMs: 1_000 });
    const a = session("a", 4n, { downstream: true });
    t.add(a.s);
    history.keep(a.s, 0, 2, rows(2));
    kv.idle = ["a", "gone-already"];
    await t.expire();
    expect(t.ids()).toEqual([]);
    expect(a.replies[0].status).toMatchObject({
      code: "expired",
      message: "session a idle past its 1000 ms lease",
    });
    expect([a.s.closed, a.s.ending, a.link.aborted]).toEqual([true, true, "lease expired"]);
    expect(kv.released).toEqual([]);
    expect(history.bytes).toBe(0);
    expect(() => t.checkEpoch(openAt("a", 4n))).toThrow("session a ended here at epoch 4");
  });

  it("frees a parked session no repair resumed in time, and forgets its epoch", async () => {
    vi.useFakeTimers();
    const { kv, t } = table({ parkMs: 1_000 });
    const p = session("p", 2n, { parkOnLoss: true, downstream: true });
    t.add(p.s);
    await t.park(p.s, "next shard gone");
    expect(p.link.aborted).toBe("next shard gone");
    expect(p.s.downstream).toBeUndefined();
    vi.advanceTimersByTime(1_000);
    await t.expire();
    expect(t.ids()).toEqual(["p"]);
    vi.advanceTimersByTime(1);
    await t.expire();
    expect(t.ids()).toEqual([]);
    expect(kv.released).toEqual([["p", "no repair resumed it"]]);
    // a session that failed is not kept: its driver may open it again at that epoch
    expect(t.checkEpoch(openAt("p", 2n))).toBeUndefined();
  });
});

describe("session table: park, adopt, drop", () => {
  it("parks only for a driver that repairs routes; the others' sessions are freed at once", async () => {
    const { kv, t } = table();
    const plain = session("plain", 1n, { downstream: true });
    const repairable = session("kept", 1n, { parkOnLoss: true });
    t.add(plain.s);
    t.add(repairable.s);
    const waiting = new Promise((resolve, reject) => repairable.s.rebuilds.set(1n, { resolve, reject }))
      .catch((e) => e);
    await t.park(plain.s, "route broke");
    await t.park(repairable.s, "route broke");
    expect(t.ids()).toEqual(["kept"]);
    expect([plain.s.closed, plain.link.aborted]).toEqual([true, "route broke"]);
    expect(kv.released).toEqual([["plain", "route broke"]]);
    expect(repairable.s.parkedUntil).toBeGreaterThan(0);
    expect(await waiting).toMatchObject({ code: "unavailable", message: "route broke" });
    expect(repairable.s.rebuilds.size).toBe(0);
    // parked with no time to wait: freed at once too
    const { t: none } = table({ parkMs: 0 });
    const q = session("q", 1n, { parkOnLoss: true });
    none.add(q.s);
    await none.park(q.s, "gone");
    expect(q.s.closed).toBe(true);
  });

  it("refuses an OPEN at or below the epoch open here, and returns the older session to supersede", () => {
    const { t } = table();
    const s = session("s", 3n);
    t.add(s.s);
    expect(() => t.checkEpoch(openAt("s", 3n))).toThrow("session s is open at epoch 3");
    expect(() => t.checkEpoch(openAt("s", 2n))).toThrow("session s is open at epoch 3");
    expect(t.checkEpoch(openAt("s", 4n))).toBe(s.s);
  });

  it("a repair's session adopts the old one's KV cut back, with what it sent on before there", async () => {
    const { kv, history, t } = table();
    const old = session("s", 1n, { downstream: true });
    old.s.nextPos = 6;
    old.s.prefixLineage = "ab";
    history.keep(old.s, 0, 2, rows(2));
    history.keep(old.s, 2, 2, rows(2));
    history.keep(old.s, 4, 2, rows(2));
    t.add(old.s);
    const s = session("s", 2n).s;
    expect(await t.adopt(old.s, s, 4)).toBe(true);
    expect(kv.trimmed).toEqual([["s", 4]]);
    expect([old.s.closed, old.link.aborted, old.s.sent]).toEqual([true, "re-routed", undefined]);
    expect([s.nextPos, s.prefixLineage, s.sent?.map((e) => e.start)]).toEqual([4, "ab", [0, 2]]);
    expect(history.bytes).toBe(s.sentBytes);
    // a cut inside what was sent leaves the new session no history to rebuild from
    const later = session("s", 3n).s;
    expect(await t.adopt(s, later, 3)).toBe(true);
    expect([later.sent, later.sentBytes, history.bytes]).toEqual([undefined, 0, 0]);
  });

  it("does not adopt what it cannot: an old session that holds less, or whose engine refuses the cut", async () => {
    const { kv, t } = table();
    const short = session("a");
    short.s.nextPos = 2;
    expect(await t.adopt(short.s, session("a", 2n).s, 3)).toBe(false);
    kv.trimFails = true;
    const old = session("b");
    old.s.nextPos = 5;
    expect(await t.adopt(old.s, session("b", 2n).s, 3)).toBe(false);
    expect(old.s.closed).toBe(false);
  });

  it("drops once: a closed session frees nothing again, and one that was ending is not released twice", async () => {
    const { kv, t } = table();
    const a = session("a");
    t.add(a.s);
    await t.drop(a.s, "x");
    await t.drop(a.s, "y");
    const b = session("b");
    b.s.ending = true;
    t.add(b.s);
    await t.drop(b.s, "z", true);
    expect(kv.released).toEqual([["a", "x"]]);
    expect(t.ids()).toEqual([]);
    expect(() => t.checkEpoch(openAt("b", 1n))).toThrow("ended here at epoch 1");
    expect(t.checkEpoch(openAt("a", 1n))).toBeUndefined();
  });
});

describe("rebuild history", () => {
  it("keeps a session's outputs in order while the node's budget lasts, and none once they have a gap", () => {
    const bytes = rows(2).data.length;
    const history = new RebuildHistory(bytes * 3);
    const a = session("a").s;
    const b = session("b").s;
    history.keep(a, 0, 2, rows(2));
    history.keep(a, 2, 2, rows(2));
    history.keep(b, 0, 2, rows(2));
    expect([a.sent?.length, b.sent?.length, history.bytes]).toEqual([2, 1, bytes * 3]);
    // past the budget: the session that would go over keeps nothing
    history.keep(b, 2, 2, rows(2));
    expect([b.sent, history.bytes]).toEqual([undefined, bytes * 2]);
    // a gap (positions that did not come through here): the same
    history.keep(a, 6, 2, rows(2));
    expect([a.sent, a.sentBytes, history.bytes]).toEqual([undefined, 0, 0]);
    // once incomplete, nothing more is kept
    history.keep(a, 8, 2, rows(2));
    expect(a.sent).toBeUndefined();
  });
});
