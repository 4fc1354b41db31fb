import { describe, expect, it } from "vitest";
import { AsyncQueue } from "../../src/seam/async-queue.ts";

describe("async queue", () => {
  it("an async queue delivers in order, then ends or fails", async () => {
    const q = new AsyncQueue<number>();
    q.push(1);
    q.push(2);
    q.end();
    expect(q.push(3)).toBe(false);
    const got: number[] = [];
    for await (const v of q) got.push(v);
    expect(got).toEqual([1, 2]);
    const f = new AsyncQueue<number>();
    setTimeout(() => f.fail(new Error("gone")), 5);
    await expect((async () => {
      for await (const _ of f);
    })()).rejects.toThrow("gone");
  });
});
