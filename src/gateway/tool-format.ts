// The generic tool format, for a model whose chat template does not describe tools: the tools go
// into the system message as JSON Schema, and the answer is one JSON object, either
// {"tool_calls": [{"name", "arguments"}]} or {"content": "…"}, which the sampling node's grammar
// (made from answerSchema by llama.cpp's converter) enforces. Earlier calls and their results
// are shown to the model in the same form.
import type { ChatMessage as TemplateMessage } from "../engine/tokenizer.ts";
import type { ChatMessage, ToolCall, ToolChoice, ToolSpec } from "./openai.ts";

/** The JSON Schema every answer follows under `choice` (none: there is no constraint). */
export function answerSchema(tools: readonly ToolSpec[], choice: ToolChoice, parallel: boolean) {
  const callable = typeof choice === "object" ? tools.filter((t) => t.name === choice.name) : tools;
  const call = (t: ToolSpec) => ({
    type: "object",
    properties: { name: { const: t.name }, arguments: t.parameters },
    required: ["name", "arguments"],
    additionalProperties: false,
  });
  const calls = {
    type: "object",
    properties: {
      tool_calls: {
        type: "array",
        items: callable.length === 1 ? call(callable[0]) : { anyOf: callable.map(call) },
        minItems: 1,
        ...(parallel && typeof choice !== "object" ? {} : { maxItems: 1 }),
      },
    },
    required: ["tool_calls"],
    additionalProperties: false,
  };
  if (choice !== "auto") return calls;
  const content = {
    type: "object",
    properties: { content: { type: "string" } },
    required: ["content"],
    additionalProperties: false,
  };
  return { anyOf: [calls, content] };
}

/** What the system message adds: the tools, and the answer's form. */
export function toolInstructions(tools: readonly ToolSpec[], choice: ToolChoice): string {
  const listed = (typeof choice === "object" ? tools.filter((t) => t.name === choice.name) : tools)
    .map((t) => JSON.stringify({ name: t.name, description: t.description ?? "", parameters: t.parameters }));
  const call = '{"tool_calls": [{"name": "<function name>", "arguments": {<arguments>}}]}';
  const how = choice === "auto"
    ? `To call functions, answer with ${call}. To answer directly, or once the results you need are in the conversation, answer with {"content": "<your answer>"}.`
    : `Answer with ${call}.`;
  return `You can call these functions; each one's arguments follow its JSON Schema:\n${
    listed.join("\n")
  }\n\n${how}`;
}

/**
 * The conversation as the template takes it: the instructions in the system message (one is
 * added when there is none), assistant turns as the JSON they stand for (in plain words when
 * the format is off: tool_choice none), tool results as user turns that name their call by its
 * number (never by its random id).
 */
export function templateMessages(
  messages: readonly ChatMessage[],
  tools: readonly ToolSpec[],
  choice: ToolChoice,
): TemplateMessage[] {
  // calls by id, numbered in the order they were made: ids are random, and the prompt (so the
  // answer) must not depend on them
  const calls = new Map<string, { name: string; n: number }>();
  const active = choice !== "none" && tools.length > 0;
  const out: TemplateMessage[] = messages.map((m) => {
    if (m.role === "assistant") {
      for (const c of m.toolCalls ?? []) calls.set(c.id, { name: c.name, n: calls.size + 1 });
      return { role: "assistant", content: active ? assistantJson(m) : assistantText(m) };
    }
    if (m.role === "tool") {
      const call = calls.get(m.toolCallId!);
      const which = call ? `${call.name} (call ${call.n})` : "a function";
      return { role: "user", content: `Result of ${which}: ${m.content}` };
    }
    return { role: m.role === "developer" ? "system" : m.role, content: m.content };
  });
  if (!active) return out;
  const instructions = toolInstructions(tools, choice);
  const sys = out.findIndex((m) => m.role === "system");
  if (sys < 0) return [{ role: "system", content: instructions }, ...out];
  out[sys] = { role: "system", content: `${out[sys].content}\n\n${instructions}` };
  return out;
}

/** An assistant turn in the answer's own form (what the grammar had it write). */
function assistantJson(m: ChatMessage): string {
  if (!m.toolCalls?.length) return JSON.stringify({ content: m.content });
  const calls = m.toolCalls.map((c) => ({ name: c.name, arguments: parsedOr(c.arguments) }));
  return JSON.stringify({ tool_calls: calls });
}

/** An assistant turn in plain words, where no format is asked for: its calls as calls. */
function assistantText(m: ChatMessage): string {
  const calls = (m.toolCalls ?? []).map((c) => `Calling ${c.name}(${c.arguments}).`);
  return [m.content, ...calls].filter((x) => x).join("\n");
}

const parsedOr = (s: string): unknown => {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
};

/** An answer in the generic format: the calls it makes, or its text. */
export interface ToolAnswer {
  readonly content: string | null;
  readonly toolCalls: ToolCall[];
}

/**
 * Reads an answer. One that does not parse (cut by max_tokens) is returned as text: the grammar
 * allowed nothing else, so only a cut answer is incomplete.
 */
export function readAnswer(text: string, newId: () => string = newCallId): ToolAnswer {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { content: text, toolCalls: [] };
  }
  const o = v as { tool_calls?: unknown; content?: unknown };
  if (Array.isArray(o?.tool_calls)) {
    const calls = o.tool_calls as Array<{ name?: unknown; arguments?: unknown }>;
    return {
      content: null,
      toolCalls: calls.map((c) => ({
        id: newId(),
        name: String(c.name),
        arguments: JSON.stringify(c.arguments ?? {}),
      })),
    };
  }
  return { content: typeof o?.content === "string" ? o.content : text, toolCalls: [] };
}

/** A call's id, as OpenAI's look. */
export const newCallId = () => `call_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`;
