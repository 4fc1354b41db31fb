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
