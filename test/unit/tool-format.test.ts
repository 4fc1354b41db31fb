import { describe, expect, it } from "vitest";
import { answerSchema, readAnswer, templateMessages } from "../../src/gateway/tool-format.ts";
import type { ToolSpec } from "../../src/gateway/openai.ts";

const weather: ToolSpec = {
  name: "get_weather",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const time: ToolSpec = {
  name: "get_time",
  description: "now",
  parameters: { type: "object", properties: {} },
};

describe("the generic tool format", () => {
  it("makes the answer's schema per tool_choice: calls or content, required calls, one named function, one call when not parallel", () => {
    const auto = answerSchema([weather, time], "auto", true) as { anyOf: unknown[] };
    expect(auto.anyOf).toHaveLength(2);
    expect(auto.anyOf[1]).toMatchObject({
      properties: { content: { type: "string" } },
      required: ["content"],
    });
    const calls = auto.anyOf[0] as {
      properties: { tool_calls: { items: { anyOf: unknown[] }; maxItems?: number } };
    };
    expect(calls.properties.tool_calls.items.anyOf).toEqual([
      {
        type: "object",
        properties: { name: { const: "get_weather" }, arguments: weather.parameters },
        required: ["name", "arguments"],
        additionalProperties: false,
      },
      expect.objectContaining({ properties: { name: { const: "get_time" }, arguments: time.parameters } }),
    ]);
    expect(calls.properties.tool_calls.maxItems).toBeUndefined();
    expect(answerSchema([weather, time], "required", false)).toMatchObject({
      required: ["tool_calls"],
      properties: { tool_calls: { minItems: 1, maxItems: 1 } },
    });
    expect(answerSchema([weather, time], { name: "get_time" }, true)).toMatchObject({
      properties: { tool_calls: { items: { properties: { name: { const: "get_time" } } }, maxItems: 1 } },
    });
  });

  it("shows the tools in the system message and earlier calls and results in the answer's own form", () => {
    const out = templateMessages(
      [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Weather in Oslo?" },
        {
          role: "assistant",
          content: "",
          toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' }],
        },
        { role: "tool", content: "rain", toolCallId: "c1" },
      ],
      [weather],
      "auto",
    );
    expect(out[0].role).toBe("system");
    expect(out[0].content).toMatch(/^Be brief\.\n\nYou can call these functions/);
    expect(out[0].content).toContain(
      JSON.stringify({ name: "get_weather", description: "", parameters: weather.parameters }),
    );
    expect(out[2]).toEqual({
      role: "assistant",
      content: '{"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}}]}',
    });
    expect(out[3]).toEqual({ role: "user", content: "Result of get_weather (call 1): rain" });
    // no system message: one is added; tool_choice none: none, and earlier calls in plain words
    expect(templateMessages([{ role: "user", content: "hi" }], [weather], "required")[0].role).toBe("system");
    expect(templateMessages(
      [
        { role: "developer", content: "d" },
        {
          role: "assistant",
          content: "",
          toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' }],
        },
        { role: "assistant", content: "It rains." },
      ],
      [weather],
      "none",
    )).toEqual([
      { role: "system", content: "d" },
      { role: "assistant", content: 'Calling get_weather({"city":"Oslo"}).' },
      { role: "assistant", content: "It rains." },
    ]);
    // with the format on, a plain answer is shown as the format has it
    expect(templateMessages([{ role: "assistant", content: "It rains." }], [weather], "auto")[1]).toEqual({
      role: "assistant",
      content: '{"content":"It rains."}',
    });
  });

  it("reads an answer into calls (arguments as JSON text) or text; a cut one stays text", () => {
    let n = 0;
    const id = () => `call_${++n}`;
    expect(readAnswer('{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}', id))
      .toEqual({
        content: null,
        toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' }],
      });
    expect(readAnswer('{"content": "It rains."}', id)).toEqual({ content: "It rains.", toolCalls: [] });
    expect(readAnswer('{"tool_calls": [{"name": "get_wea', id)).toEqual({
      content: '{"tool_calls": [{"name": "get_wea',
      toolCalls: [],
    });
  });
});
