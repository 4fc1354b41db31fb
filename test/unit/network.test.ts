import { describe, expect, it } from "vitest";
import { ApiError, parseRequest } from "../../src/gateway/openai.ts";
import { StopMatcher } from "../../src/gateway/stop.ts";
import { decodeEnvelope, encodeEnvelope } from "../../src/relay/envelope.ts";
import { peerToken, verifyPeerToken } from "../../src/relay/token.ts";
import { Kind } from "../../src/gen/strata/relay/v1/relay_pb.ts";
import { parseHopUrl } from "../../src/route/hop-url.ts";
import { checkCoverage } from "../../src/route/plan.ts";
import { choose } from "../../src/sampling/sampler.ts";
import { uniformAt } from "../../src/sampling/draw.ts";
import { type Candidate, disjointRoutes } from "../../src/tracker/select.ts";
import { judgeProbe } from "../../src/tracker/probe.ts";
import { AsyncQueue } from "../../src/seam/async-queue.ts";

const cand = (node: string, start: number, end: number, load = 0, tokensPerS = 100): Candidate => ({
  node,
  url: `http://${node}`,
  range: { start, end },
  load,
  tokensPerS,
  kvCells: 1024,
});

describe("route selection", () => {
  it("covers every layer once, prefers fewer hops and faster nodes, skips full ones", () => {
    // c alone: 1000/60 + 3 ms a token; a then b: 2 × (10 + 3)
    const cs = [cand("a", 0, 10), cand("b", 10, 30), cand("c", 0, 30, 0, 60), cand("d", 0, 10, 1)];
    const routes = disjointRoutes(cs, 30, 5);
    expect(routes.map((r) => r.map((c) => c.node))).toEqual([["c"], ["a", "b"]]);
    // d is full (load 1): never chosen, even with a and b busy
    const busy = disjointRoutes([cand("a", 0, 10, 0.9), cand("b", 10, 30), cand("d", 0, 10, 1)], 30, 2);
    expect(busy.map((r) => r.map((c) => c.node))).toEqual([["a", "b"]]);
    expect(disjointRoutes([cand("a", 0, 10), cand("b", 12, 30)], 30, 1)).toEqual([]);
  });

  it("checks a static route's coverage", () => {
    expect(() =>
      checkCoverage(
        [{ url: "x", range: { start: 0, end: 12 } }, { url: "y", range: { start: 12, end: 30 } }],
        30,
      )
    )
      .not.toThrow();
    expect(() =>
      checkCoverage(
        [{ url: "x", range: { start: 0, end: 12 } }, { url: "y", range: { start: 13, end: 30 } }],
        30,
      )
    )
      .toThrow(/needs layer 12 next/);
    expect(() => checkCoverage([{ url: "x", range: { start: 0, end: 12 } }], 30)).toThrow(
      /stops at layer 12 of 30/,
    );
  });
});

describe("sampling", () => {
  const logits = Float32Array.from([0, 3, 2.5, -1, 1]);
  it("greedy takes the best logit and reports the top-2 gap", () => {
    expect(choose(logits, undefined, 0)).toEqual({ token: 1, margin: 0.5 });
  });
  it("draws depend on seed and position only, and respect top-k", () => {
    const p = { temperature: 1, topK: 2, topP: 1, seed: 42n };
    const a = Array.from({ length: 200 }, (_, i) => choose(logits, p, i).token);
    expect(a).toEqual(Array.from({ length: 200 }, (_, i) => choose(logits, p, i).token));
    expect(new Set(a)).toEqual(new Set([1, 2]));
    // frequencies follow softmax over the two: e^0.5 / (1 + e^0.5) ≈ 0.62
    const share = a.filter((t) => t === 1).length / a.length;
    expect(share).toBeGreaterThan(0.5);
    expect(share).toBeLessThan(0.75);
    expect(uniformAt(1n, 5)).not.toBe(uniformAt(2n, 5));
    expect(uniformAt(1n, 5)).toBe(uniformAt(1n, 5));
  });
  it("top-p keeps the smallest prefix reaching p", () => {
    const p = { temperature: 1, topK: 0, topP: 0.1, seed: 7n };
    for (let i = 0; i < 50; i++) expect(choose(logits, p, i).token).toBe(1);
  });
});

describe("gateway requests", () => {
  it("parses chat and completion bodies with OpenAI defaults", () => {
    const r = parseRequest("chat", {
      model: "m",
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      max_tokens: 5,
      stop: "\n",
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(r).toMatchObject({
      model: "m",
      maxTokens: 5,
      temperature: 1,
      topP: 1,
      stop: ["\n"],
      stream: true,
      includeUsage: true,
    });
    expect(r.messages).toEqual([{ role: "user", content: "hi" }]);
    expect(parseRequest("completion", { model: "m", prompt: ["once"] }).prompt).toBe("once");
  });
  it("refuses bad fields with the parameter named", () => {
    const refused = (kind: "chat" | "completion", body: unknown) => {
      try {
        parseRequest(kind, body);
      } catch (e) {
        return [(e as ApiError).status, (e as ApiError).param];
      }
      return "accepted";
    };
    expect(refused("chat", null)).toEqual([400, ""]);
    expect(refused("chat", { messages: [] })).toEqual([400, "model"]);
    expect(refused("chat", { model: "m", messages: [] })).toEqual([400, "messages"]);
    expect(refused("chat", { model: "m", messages: [{ role: "wizard", content: "x" }] })).toEqual([
      400,
      "messages[0].role",
    ]);
    expect(refused("chat", { model: "m", messages: [{ role: "user", content: "x" }], temperature: 3 }))
      .toEqual([400, "temperature"]);
    expect(refused("chat", { model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 0 }))
      .toEqual([400, "max_tokens"]);
    expect(refused("chat", { model: "m", messages: [{ role: "user", content: "x" }], n: 2 })).toEqual([
      400,
      "n",
    ]);
    expect(refused("completion", { model: "m", prompt: 5 })).toEqual([400, "prompt"]);
  });
  it("holds back text that may start a stop sequence and cuts at the first one", () => {
    const m = new StopMatcher(["\nUser:", "END"]);
    expect(m.update("Hello")).toEqual({ release: "Hello", stopped: false });
    expect(m.update("Hello\nUs")).toEqual({ release: "", stopped: false });
    expect(m.update("Hello\nUsual")).toEqual({ release: "\nUsual", stopped: false });
    expect(m.update("Hello\nUsual E")).toEqual({ release: " ", stopped: false });
    expect(m.update("Hello\nUsual END more")).toEqual({ release: "", stopped: true });
    const n = new StopMatcher(["zz"]);
    n.update("abz");
    expect(n.flush()).toBe("z");
  });
});

describe("relay", () => {
  it("envelopes carry the frame bytes untouched and refuse truncation", () => {
    const payload = Uint8Array.from({ length: 300 }, (_, i) => i & 255);
    const env = decodeEnvelope(
      encodeEnvelope({ to: "b", from: "a", channel: "c1", kind: Kind.DATA }, payload),
    );
    expect(env.header.to).toBe("b");
    expect(env.header.kind).toBe(Kind.DATA);
    expect(env.payload).toEqual(payload);
    expect(() => decodeEnvelope(Uint8Array.of(200, 0, 0, 0, 1))).toThrow(/relay header of 200 bytes/);
  });
  it("peer tokens prove their name and nothing else", async () => {
    const t = await peerToken("secret", "node-a");
    expect(await verifyPeerToken("secret", t)).toBe("node-a");
    expect(await verifyPeerToken("other", t)).toBeUndefined();
    expect(await verifyPeerToken("secret", t.replace("node-a", "node-b"))).toBeUndefined();
    expect(await verifyPeerToken("secret", "garbage")).toBeUndefined();
    await expect(peerToken("s", "bad name")).rejects.toThrow(/peer name/);
  });
  it("hop URLs name direct nodes and relay peers", () => {
    expect(parseHopUrl("http://127.0.0.1:7801/")).toEqual({ kind: "direct", url: "http://127.0.0.1:7801" });
    expect(parseHopUrl("relay+ws://h:7700/tail")).toEqual({
      kind: "relay",
      relay: "ws://h:7700",
      peer: "tail",
    });
    expect(() => parseHopUrl("ftp://x")).toThrow(/use http/);
    expect(() => parseHopUrl("relay+ws://h:7700/")).toThrow(/names no relay peer/);
  });
});

describe("admission and streams", () => {
  it("judges a probe against the reference within the stated tolerance", () => {
    const ref = Float32Array.from([10, -20, 5]);
    expect(judgeProbe(ref, Float32Array.from([10, -20, 5.001]), 1e-4).ok).toBe(true);
    expect(judgeProbe(ref, Float32Array.from([10.5, -20, 5]), 1e-4).ok).toBe(false);
    expect(judgeProbe(ref, Float32Array.from([NaN, -20, 5]), 1e-4).ok).toBe(false);
    expect(judgeProbe(ref, Float32Array.from([10]), 1e-4).ok).toBe(false);
  });
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
