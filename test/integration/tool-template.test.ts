import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("tools in a model's own chat format (llama.cpp's chat machinery)", () => {
  it("renders the template's tools and tool turns, constrains a call to its schema, reads it back, and serves it through strata up", async () => {
    const r = await denoRun(`${root}test/integration/tool-template.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // the template with tools is used; SmolLM2's own (no tools) keeps the generic format
    expect(out.template_knows_tools).toBe(true);
    expect(out.smollm2_knows_tools).toBe(false);
    expect(out.plan).toMatchObject({
      answer: "template",
      prompt_lists_tools: true,
      required_lazy: false,
      auto_triggers: ["<tool_call>\n"],
    });
    // the strict grammar starts with the generation prompt: the node feeds it first
    expect(out.plan.required_prefill).toEqual(out.plan.generation_prompt);
    expect(out.round_trip_prompt).toEqual({ call: true, result: true });
    // past a forced "<tool_call>", the grammar finishes a call that follows the schema
    expect(out.decoded).toMatchObject({
      finish_reason: "tool_calls",
      name: "get_weather",
      valid: true,
      calls: 1,
    });
    expect(out.parse_plain).toMatchObject({ text: "It is sunny.", finishReason: "stop" });
    // served: the prompts are the template's (the planned token counts), and answers come back
    expect(out.served.first.prompt_tokens).toBe(out.served.planned_prompt_tokens[0]);
    expect(out.served.first.finish_reason).toMatch(/^(stop|length|tool_calls)$/);
    expect(out.served.second.prompt_tokens).toBeGreaterThan(out.served.first.prompt_tokens);
    expect(out.served.second.finish_reason).toMatch(/^(stop|length|tool_calls)$/);
  });
});
