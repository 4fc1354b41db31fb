import { describe, expect, it } from "vitest";
import { ApiError, parseRequest } from "../../src/gateway/openai.ts";
import { StopMatcher } from "../../src/gateway/stop.ts";

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
      maxNewTokens: 5,
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
    expect(refused("chat", { model: "m", messages: [{ role: "user", content: "x" }], n: 9 })).toEqual([
      400,
      "n",
    ]);
    expect(refused("completion", { model: "m", prompt: 5 })).toEqual([400, "prompt"]);
  });
  it("refuses a field that would change the answer and is not honoured, naming it; ignores harmless ones", () => {
    const chat = { model: "m", messages: [{ role: "user", content: "x" }] };
    const param = (extra: Record<string, unknown>) => {
      try {
        parseRequest("chat", { ...chat, ...extra });
        return "accepted";
      } catch (e) {
        return `${(e as ApiError).status} ${(e as ApiError).param}: ${(e as ApiError).message}`;
      }
    };
    expect(param({ functions: [{ name: "f" }] })).toMatch(/^400 functions: .*not supported/);
    expect(param({ mirostat: 2 })).toMatch(/^400 mirostat: .*not supported/);
    expect(param({ tool_choice: "required" })).toMatch(/^400 tool_choice/);
    expect(param({ response_format: { type: "text" }, user: "u", metadata: { a: "b" }, store: false })).toBe(
      "accepted",
    );
    expect(param({ tool_choice: "none", tools: [] })).toBe("accepted");
  });

  it("parses tools, tool_choice, tool messages and response_format, refusing what does not fit", () => {
    const weather = {
      type: "function",
      function: {
        name: "get_weather",
        description: "the weather",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    };
    const r = parseRequest("chat", {
      model: "m",
      tools: [weather],
      parallel_tool_calls: false,
      messages: [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{
            id: "c1",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
          }],
        },
        { role: "tool", tool_call_id: "c1", content: "rain" },
      ],
    });
    expect(r).toMatchObject({
      tools: [{ name: "get_weather", description: "the weather", parameters: weather.function.parameters }],
      toolChoice: "auto",
      parallelToolCalls: false,
      responseFormat: { type: "text" },
    });
    expect(r.messages).toEqual([
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: "",
        toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' }],
      },
      { role: "tool", content: "rain", toolCallId: "c1" },
    ]);
    const chat = { model: "m", messages: [{ role: "user", content: "x" }] };
    expect(
      parseRequest("chat", {
        ...chat,
        tools: [weather],
        tool_choice: { type: "function", function: { name: "get_weather" } },
      }).toolChoice,
    )
      .toEqual({ name: "get_weather" });
    expect(
      parseRequest("chat", {
        ...chat,
        response_format: {
          type: "json_schema",
          json_schema: { name: "p", schema: { type: "object" }, strict: true },
        },
      }).responseFormat,
    )
      .toEqual({ type: "json_schema", name: "p", schema: { type: "object" }, strict: true });

    const param = (extra: Record<string, unknown>) => {
      try {
        parseRequest("chat", { ...chat, ...extra });
        return "accepted";
      } catch (e) {
        return (e as ApiError).param;
      }
    };
    expect({
      noName: param({ tools: [{ type: "function", function: {} }] }),
      badName: param({ tools: [{ type: "function", function: { name: "get weather" } }] }),
      twice: param({ tools: [weather, weather] }),
      badParameters: param({ tools: [{ type: "function", function: { name: "f", parameters: [] } }] }),
      unknownChoice: param({ tools: [weather], tool_choice: { type: "function", function: { name: "g" } } }),
      requiredWithout: param({ tool_choice: "required" }),
      toolWithoutId: param({ messages: [{ role: "tool", content: "x" }] }),
      badCall: param({
        messages: [{
          role: "assistant",
          tool_calls: [{ id: "c", type: "function", function: { name: "f" } }],
        }],
      }),
      badFormat: param({ response_format: { type: "xml" } }),
      unnamedSchema: param({ response_format: { type: "json_schema", json_schema: { schema: {} } } }),
      formatWithTools: param({ tools: [weather], response_format: { type: "json_object" } }),
      logprobsWithTools: param({ tools: [weather], logprobs: true }),
      formatWithToolsOff: param({
        tools: [weather],
        tool_choice: "none",
        response_format: { type: "json_object" },
      }),
    }).toEqual({
      noName: "tools[0].function.name",
      badName: "tools[0].function.name",
      twice: "tools[1].function.name",
      badParameters: "tools[0].function.parameters",
      unknownChoice: "tool_choice",
      requiredWithout: "tool_choice",
      toolWithoutId: "messages[0].tool_call_id",
      badCall: "messages[0].tool_calls[0].function",
      badFormat: "response_format.type",
      unnamedSchema: "response_format.json_schema",
      formatWithTools: "response_format",
      logprobsWithTools: "logprobs",
      formatWithToolsOff: "accepted",
    });
    expect(() => parseRequest("completion", { model: "m", prompt: "x", tools: [weather] })).toThrow(/chat/);
  });

  it("parses the sampling controls, logprobs and n with their bounds", () => {
    const r = parseRequest("chat", {
      model: "m",
      messages: [{ role: "user", content: "x" }],
      presence_penalty: 0.5,
      frequency_penalty: -1,
      repeat_penalty: 1.1,
      min_p: 0.05,
      logit_bias: { "42": -100, "7": 2.5 },
      logprobs: true,
      top_logprobs: 5,
      n: 3,
    });
    expect(r).toMatchObject({
      presencePenalty: 0.5,
      frequencyPenalty: -1,
      repeatPenalty: 1.1,
      minP: 0.05,
      logitBias: { 42: -100, 7: 2.5 },
      logprobs: true,
      topLogprobs: 5,
      n: 3,
    });
    expect(parseRequest("completion", { model: "m", prompt: "p", logprobs: 2 })).toMatchObject({
      logprobs: true,
      topLogprobs: 2,
    });
    const refusedParam = (kind: "chat" | "completion", extra: Record<string, unknown>) => {
      try {
        parseRequest(kind, { model: "m", messages: [{ role: "user", content: "x" }], prompt: "p", ...extra });
      } catch (e) {
        return (e as ApiError).param;
      }
      return "accepted";
    };
    expect(refusedParam("chat", { top_logprobs: 3 })).toBe("top_logprobs");
    expect(refusedParam("chat", { logprobs: true, top_logprobs: 21 })).toBe("top_logprobs");
    expect(refusedParam("completion", { logprobs: 6 })).toBe("logprobs");
    expect(refusedParam("chat", { logit_bias: { a: 1 } })).toBe("logit_bias");
    expect(refusedParam("chat", { logit_bias: { "1": 101 } })).toBe("logit_bias");
    expect(refusedParam("chat", { presence_penalty: 3 })).toBe("presence_penalty");
    expect(refusedParam("chat", { min_p: 2 })).toBe("min_p");
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
