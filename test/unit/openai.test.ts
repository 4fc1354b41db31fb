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
    expect(param({ tools: [{ type: "function", function: { name: "f" } }] })).toMatch(/^400 tools: /);
    expect(param({ response_format: { type: "json_object" } })).toMatch(
      /^400 response_format: .*not supported/,
    );
    expect(param({ tool_choice: "required" })).toMatch(/^400 tool_choice/);
    expect(param({ response_format: { type: "text" }, user: "u", metadata: { a: "b" }, store: false })).toBe(
      "accepted",
    );
    expect(param({ tool_choice: "none", tools: [] })).toBe("accepted");
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
