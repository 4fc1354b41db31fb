import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

// The API beyond plain chat on `strata up`, through the openai npm client and the Python
// package, against whole-model llama.cpp (see openai-api.deno.ts).
describe("the OpenAI API: tools, structured output, logprobs, logit_bias, n, honest errors, status", () => {
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
    expect(out.unsupported).toEqual({ status: 400, param: "functions" });

    // a tool round trip: a call whose arguments follow get_weather's schema, streamed the same,
    // then the tool's result in the prompt and an answer
    expect(out.tools).toMatchObject({
      finish_reason: "tool_calls",
      content: null,
      name: "get_weather",
      valid: true,
    });
    expect(out.tools.streamed).toMatchObject({
      name: "get_weather",
      finish_reason: "tool_calls",
      same: true,
    });
    expect(out.tools.final.finish_reason).toBe("stop");
    // the answer uses the result (its sky: "sunny")
    expect(out.tools.final.content).toMatch(/sunny/);
    // the call and its result are in the final prompt
    expect(out.tools.prompt_tokens.final).toBeGreaterThan(out.tools.prompt_tokens.plain + 20);

    // json_schema, strict: 20 sampled answers parse and validate (Ajv); 16 at once, batched at
    // the nodes, are byte for byte the answers alone
    // greedy, the route's answer is whole-model llama.cpp's under the same grammar, exactly
    expect(out.json_schema.greedy.text).toBe(out.json_schema.greedy.whole_text);
    expect(out.json_schema.valid).toEqual(Array(20).fill("ok"));
    expect(out.json_schema.finish).toEqual(Array(20).fill("stop"));
    expect(out.json_schema.distinct).toBeGreaterThan(10);
    expect(out.json_schema.together_same).toEqual(Array(16).fill(true));
    expect(out.json_schema.mean_batch_sessions).toBeGreaterThan(1);

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
    expect(out.python.tools).toMatchObject({
      finish_reason: "tool_calls",
      name: "get_weather",
      arguments: out.tools.arguments,
      valid: true,
      streamed: { name: "get_weather", arguments: JSON.stringify(out.tools.arguments) },
      streamed_finish: "tool_calls",
      final: { finish_reason: "stop" },
    });
    expect(out.python.json_schema_valid).toEqual([true, true, true]);
    expect(out.python.json_schema).toEqual(out.json_schema.texts.slice(0, 3));

    // `strata status`: both nodes with their layers, the whole model covered, slots free
    const status = out.status.text.split("\n");
    expect(status[0]).toMatch(/^model smollm2: 30 layers, artifact [0-9a-f]{12}…$/);
    expect(status[1]).toMatch(/^serving: \d+ free session slots, context 8192 tokens$/);
    expect(status[2]).toBe("coverage: 0:30 ×1");
    expect(status.filter((l: string) => /^route key: [0-9a-f]{16}…$/.test(l))).toHaveLength(1);
    expect(status.filter((l: string) => /^ {2}\S+ +(0:12|12:30) +native-cpu +admitted /.test(l)))
      .toHaveLength(2);
    expect(out.status.json.state.nodes).toHaveLength(2);
    expect(out.status.json.health.ok).toBe(true);
    expect(out.health_up).toMatchObject({ status: 200, body: { ok: true, context_length: 8192 } });
    expect(out.health_down).toMatchObject({
      status: 503,
      body: { ok: false, reason: "no complete route of admitted, live nodes" },
    });
  });
});
