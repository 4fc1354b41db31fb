import { describe, expect, it } from "vitest";
import { SessionGrammar } from "../../src/sampling/session-grammar.ts";
import { FakeEngine } from "../fakes/fake-engine.ts";

const masked = async (g: SessionGrammar, position: number) => {
  const logits = new Float32Array(8).fill(1);
  await g.mask(logits, position);
  return [...logits.keys()].filter((t) => logits[t] !== -Infinity);
};

describe("a session's grammar at the sampling node", () => {
  it("masks what the grammar rejects, and made again from before a position sampled twice (a trimmed step)", async () => {
    const engine = new FakeEngine({ nVocab: 8 });
    let made = 0;
    const g = new SessionGrammar(() => {
      made++;
      return engine.grammar({ gbnf: "allow 2 4 6" });
    }, [4]);
    await g.ready();
    expect(await masked(g, 10)).toEqual([2, 4, 6]);
    await g.accept(10, 2);
    expect(await masked(g, 11)).toEqual([2, 4, 6]);
    await g.accept(11, 6);
    expect(made).toBe(1);
    // position 11 again: the state before it is the history and position 10's token
    await masked(g, 11);
    expect(made).toBe(2);
    expect(engine.grammarTokens).toEqual([4, 2, 6, 4, 2]);
    await expect(g.accept(11, 3)).rejects.toThrow(/not allowed/);
    // one token offered: taken where allowed, refused without a change where not
    expect(await g.offer(12, 3)).toBe(false);
    expect(await g.offer(12, 4)).toBe(true);
    expect(engine.grammarTokens.slice(-1)).toEqual([4]);
    // offered again at a position already taken: the state before it first
    expect(await g.offer(12, 6)).toBe(true);
    expect(engine.grammarTokens.slice(-4)).toEqual([4, 4, 2, 6]); // remade: the history, position 10, then 6
    await g.close();
    await expect(g.mask(new Float32Array(8), 12)).rejects.toThrow(/closed/);
  });
});
