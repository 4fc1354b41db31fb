import { describe, expect, it } from "vitest";
import { admitted, chatDecodeTps, decodeTpsTogether } from "../../checks/bench/chat-rates.ts";
import { oneSessionCeiling, pipelineCeiling, stepMsAt } from "../../checks/bench/pipeline-ceiling.ts";

describe("the big bench's figures", () => {
  it("counts a chat's tokens after its first over the time from its first to its last", () => {
    expect(chatDecodeTps([1000, 1100, 1200, 1300, 1400])).toBeCloseTo(10);
    expect(chatDecodeTps([5])).toBe(0);
  });

  it("times chats at once over the spans in which any of them decodes", () => {
    // 0–1 s and 0.5–1.5 s overlap (1.5 s), 3–4 s apart: 2.5 s for 3 + 2 + 1 tokens
    const chats = [{ at: [0, 500, 800, 1000] }, { at: [500, 1000, 1500] }, { at: [3000, 4000] }];
    expect(decodeTpsTogether(chats)).toBeCloseTo(6 / 2.5);
  });

  it("admits at most so many jobs at once, in order", async () => {
    let now = 0, most = 0;
    const out = await admitted(5, 2, async (i) => {
      most = Math.max(most, ++now);
      await new Promise((r) => setTimeout(r, 5));
      now--;
      return i * 10;
    });
    expect(out).toEqual([0, 10, 20, 30, 40]);
    expect(most).toBe(2);
  });

  it("sets a route against its cores over the stages' core-seconds a token", () => {
    const a = { oneMs: 100, batchMs: 400, batchSessions: 4, threads: 1 };
    const b = { oneMs: 50, batchMs: 50, batchSessions: 8, threads: 2 };
    expect(stepMsAt(a, 2)).toBeCloseTo(200);
    // a at batch 2: 0.1 s a token; b at batch 4: 2 threads × 50 ms / 4 = 0.025 s
    expect(pipelineCeiling([{ cost: a, batch: 2 }, { cost: b, batch: 4 }], 2)).toBeCloseTo(2 / 0.125);
    expect(oneSessionCeiling([a, b])).toBeCloseTo(1000 / 150);
  });
});
