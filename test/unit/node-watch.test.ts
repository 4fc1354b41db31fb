import { afterEach, describe, expect, it, vi } from "vitest";
import { NodeWatch } from "../../src/gateway/node-watch.ts";

afterEach(() => {
  vi.useRealTimers();
});

/** A tracker the test controls: which nodes are live, and every question it was asked. */
function tracker(live: string[]) {
  const asked: string[][] = [];
  let down = false;
  const now = new Set(live);
  return {
    asked,
    live: now,
    fail: (v: boolean) => void (down = v),
    ask: (nodes: readonly string[]) => {
      asked.push([...nodes]);
      return down ? Promise.reject(new Error("tracker unreachable")) : Promise.resolve(new Set(now));
    },
  };
}

describe("node watch", () => {
  it("asks about exactly the watched nodes, and only while something is watched", async () => {
    vi.useFakeTimers();
    const t = tracker(["a", "b", "c"]);
    const watch = new NodeWatch((n) => t.ask(n), 1_000);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(t.asked).toEqual([]);
    const un1 = watch.watch(["a", "b"], () => {});
    const un2 = watch.watch(["b", "c"], () => {});
    await vi.advanceTimersByTimeAsync(1_000);
    expect(t.asked).toEqual([["a", "b", "c"]]);
    un1();
    un2();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(t.asked).toHaveLength(2); // the tick already armed runs once more and stops
    expect(vi.getTimerCount()).toBe(0);
  });

  it("tells each session at every look while its node is gone, naming it; sessions on live nodes go on", async () => {
    vi.useFakeTimers();
    const t = tracker(["a", "b", "c"]);
    const watch = new NodeWatch((n) => t.ask(n), 1_000);
    const lost: string[] = [];
    watch.watch(["a", "b"], (n) => lost.push(`s1:${n}`));
    watch.watch(["c", "b"], (n) => lost.push(`s2:${n}`));
    watch.watch(["a", "c"], (n) => lost.push(`s3:${n}`));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(lost).toEqual([]);
    t.live.delete("b");
    await vi.advanceTimersByTimeAsync(2_000);
    expect(lost).toEqual(["s1:b", "s2:b", "s1:b", "s2:b"]);
    // back (a late heartbeat): nothing more is said
    t.live.add("b");
    await vi.advanceTimersByTimeAsync(2_000);
    expect(lost).toHaveLength(4);
    watch.close();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("an unreachable tracker says nothing about the nodes: no session ends, the watch asks again", async () => {
    vi.useFakeTimers();
    const t = tracker(["a"]);
    const watch = new NodeWatch((n) => t.ask(n), 500);
    const lost: string[] = [];
    const un = watch.watch(["a"], (n) => lost.push(n));
    t.fail(true);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(lost).toEqual([]);
    expect(t.asked.length).toBeGreaterThanOrEqual(3);
    t.fail(false);
    t.live.delete("a");
    await vi.advanceTimersByTimeAsync(500);
    expect(lost).toEqual(["a"]);
    // the caller's unwatch ends it
    un();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(lost).toEqual(["a"]);
    watch.close();
  });
});
