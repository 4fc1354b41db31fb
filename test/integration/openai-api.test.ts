import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

// The API beyond plain chat on `strata up`, through the openai npm client and the Python
// package, against whole-model llama.cpp (see openai-api.deno.ts).
describe("the OpenAI API: logprobs, logit_bias, n, honest errors, status", () => {
  it("answers as whole-model llama.cpp would, refuses what it cannot honour before any byte, and says when it cannot serve", async () => {
    const r = await denoRun(`${root}test/integration/openai-api.deno.ts`, {});
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);

    // logprobs: the greedy token is the top alternative, and its logprob is the log-softmax of
    // the whole model's logits for the same prefix, exactly (one engine); streamed the same
    expect(out.logprobs.text).toBe(out.logprobs.whole_text);
    expect(out.logprobs.steps.length).toBeGreaterThan(3);
    for (const s of out.logprobs.steps) {
      expect(s.token).toBe(s.whole_token);
      expect(s.logprob).toBe(s.whole_logprob);
      expect(s.top).toHaveLength(5);
      expect(s.top[0]).toEqual([s.token, s.logprob]);
      for (let i = 1; i < 5; i++) expect(s.top[i][1]).toBeLessThanOrEqual(s.top[i - 1][1]);
    }
    expect(out.logprobs.streamed_same).toBe(true);

    // logit_bias -100 bans the greedy answer's first token: the whole model with it banned
    expect(out.logit_bias.text).toBe(out.logit_bias.whole_text);
    expect(out.logit_bias.text).not.toBe(out.logit_bias.plain_text);
    expect(out.logit_bias.text.startsWith(out.logit_bias.banned)).toBe(false);

    // n = 3 with a seed: each choice is the same request alone with seed + index
    expect(out.n.choices.map((c: [number, string]) => c[0])).toEqual([0, 1, 2]);
    expect(out.n.choices.map((c: [number, string]) => c[1])).toEqual(out.n.alone);
    expect(new Set(out.n.alone).size).toBeGreaterThan(1);

    // a streamed request past the context: a real 400, JSON, no event stream
    expect(out.stream_past_context).toMatchObject({
      status: 400,
      content_type: "application/json",
      body: { error: { code: "context_length_exceeded", param: "max_tokens" } },
    });
    expect(out.unsupported).toMatchObject({ status: 400, param: "response_format" });

    expect(out.tokenize.tokens).toEqual(out.tokenize.ours);
    expect(out.tokenize.content).toBe("What is the capital of France?");
    expect(out.models[0]).toMatchObject({ id: "smollm2", context_length: 8192, nodes_admitted: 2 });
    expect(out.models[0].free_sessions).toBeGreaterThan(0);

    // the Python package sees the same answers
    expect(out.python.text).toBe(out.logprobs.text);
    expect(out.python.logprobs.map((s: [string, number]) => [s[0], s[1]])).toEqual(
      out.logprobs.steps.map((s: { token: string; logprob: number }) => [s.token, s.logprob]),
    );
    expect(out.python.n).toEqual(out.n.alone);
    expect(out.python.past_context).toEqual({ status: 400, code: "context_length_exceeded" });

    expect(out.health_up).toMatchObject({ status: 200, body: { ok: true, context_length: 8192 } });
    expect(out.health_down).toMatchObject({
      status: 503,
      body: { ok: false, reason: "no complete route of admitted, live nodes" },
    });
  });
});
