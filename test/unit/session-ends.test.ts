import { describe, expect, it } from "vitest";
import { MAX_DONE_SESSIONS, SessionEnds } from "../../src/tracker/routes/session-ends.ts";

describe("session ends", () => {
  it("sends a quiet gateway's end at once, and ends that come during a call together in the next", async () => {
    const calls: string[][] = [];
    let release!: () => void;
    const ends = new SessionEnds((first, rest) => {
      calls.push([first, ...rest]);
      return calls.length === 1 ? new Promise<void>((r) => release = r) : Promise.resolve();
    });
    const a = ends.end("a");
    // "a" is in flight: "b", "c" and "d" wait for it, then go as one call
    const later = [ends.end("b"), ends.end("c"), ends.end("d")];
    await Promise.resolve();
    expect(calls).toEqual([["a"]]);
    release();
    await a;
    await Promise.all(later);
    expect(calls).toEqual([["a"], ["b", "c", "d"]]);
    expect([ends.calls, ends.carried]).toEqual([2, 4]);
  });

  it("rejects the ends of a batch that failed, and goes on with the next", async () => {
    let n = 0;
    const ends = new SessionEnds(() =>
      n++ === 0 ? Promise.reject(new Error("tracker down")) : Promise.resolve()
    );
    const first = ends.end("a");
    const second = ends.end("b");
    await expect(first).rejects.toThrow("tracker down");
    await expect(second).resolves.toBeUndefined();
  });

  it("never names more sessions in one call than the tracker takes", async () => {
    const sizes: number[] = [];
    let release!: () => void;
    const ends = new SessionEnds((_, rest) => {
      sizes.push(1 + rest.length);
      return sizes.length === 1 ? new Promise<void>((r) => release = r) : Promise.resolve();
    });
    const all = [ends.end("first")];
    for (let i = 0; i < MAX_DONE_SESSIONS + 10; i++) all.push(ends.end(`s${i}`));
    release();
    await Promise.all(all);
    expect(sizes).toEqual([1, MAX_DONE_SESSIONS, 10]);
  });
});
