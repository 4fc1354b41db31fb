// The OpenAI API's request shapes as the gateway accepts them, and its error shape.
// Parsing never trusts the body: every field is checked and a clear error names it.
import type { GrammarPolicy } from "../sampling/sampler.ts";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = "invalid_request_error",
    readonly code: string | null = null,
    readonly param: string | null = null,
  ) {
    super(message);
  }

  body() {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** 429 with Retry-After: busy now, worth trying again after `retryAfterS`. */
export class RateLimited extends ApiError {
  constructor(message: string, readonly retryAfterS: number) {
    super(429, message, "requests", "rate_limit_exceeded");
  }
}

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant" | "developer" | "tool";
  /** "" for an assistant turn that only called tools */
  readonly content: string;
  /** assistant: the calls it made */
  readonly toolCalls?: ToolCall[];
  /** tool: the call this is the result of */
  readonly toolCallId?: string;
}

/** A function call as the API carries it: `arguments` is JSON text. */
export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

/** A function the model may call: `parameters` is the JSON Schema of its arguments. */
export interface ToolSpec {
  readonly name: string;
  readonly description?: string;
  readonly parameters: Record<string, unknown>;
}

export type ToolChoice = "none" | "auto" | "required" | { readonly name: string };

/** `response_format`: free text, any JSON object, or JSON that follows a schema. */
export type ResponseFormat =
  | { readonly type: "text" }
  | { readonly type: "json_object" }
  | {
    readonly type: "json_schema";
    readonly name: string;
    readonly schema: Record<string, unknown>;
    readonly strict: boolean;
  };

export interface GenerationRequest {
  readonly kind: "chat" | "completion";
  readonly model: string;
  readonly messages?: ChatMessage[];
  readonly prompt?: string;
  readonly maxNewTokens?: number;
  readonly temperature: number;
  readonly topP: number;
  readonly topK: number;
  readonly seed: bigint;
  readonly stop: string[];
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** drop candidates below this share of the best one's probability (0 = off) */
  readonly minP: number;
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  /** llama-server's repeat_penalty (1 = off) */
  readonly repeatPenalty: number;
  /** token id → bias added to its logit (-100 bans it) */
  readonly logitBias: { [token: number]: number };
  /** report the chosen tokens' log-probabilities, and this many alternatives each */
  readonly logprobs: boolean;
  readonly topLogprobs: number;
  /** answers to the same prompt: choice i samples with seed + i */
  readonly n: number;
  /** chat: functions the model may call, and whether and which it must */
  readonly tools: ToolSpec[];
  readonly toolChoice: ToolChoice;
  readonly parallelToolCalls: boolean;
  readonly responseFormat: ResponseFormat;
  /** what the answer keeps to: set from the plan (prompt-plan.ts), never by a client */
  readonly grammar?: GrammarPolicy;
}

/** The most choices one request may ask for. */
export const MAX_CHOICES = 8;

/**
 * Fields that would change the answer and that this gateway does not honour yet: a request
 * naming one is refused (400, the field named) rather than answered as if it had not. Fields
 * not listed and not parsed below (user, metadata, store, service_tier, …) change nothing and
 * are ignored.
 */
const UNSUPPORTED: Record<string, (v: unknown) => boolean> = {
  // the deprecated forms of tools and tool_choice
  functions: (v) => Array.isArray(v) && v.length > 0,
  function_call: (v) => v !== "none" && v !== "auto",
  best_of: (v) => v !== 1,
  echo: (v) => v !== false,
  suffix: (v) => v !== "",
  audio: () => true,
  modalities: (v) => !(Array.isArray(v) && v.every((m) => m === "text")),
  prediction: () => true,
  grammar: () => true,
  json_schema: () => true,
  mirostat: (v) => v !== 0,
  typical_p: (v) => v !== 1,
};

const bad = (param: string, message: string) =>
  new ApiError(400, message, "invalid_request_error", null, param);

function num(body: Record<string, unknown>, key: string, lo: number, hi: number, dflt: number): number {
  const v = body[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isFinite(v) || v < lo || v > hi) {
    throw bad(key, `'${key}' must be a number from ${lo} to ${hi}`);
  }
  return v;
}

function int(body: Record<string, unknown>, key: string, lo: number): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < lo) {
    throw bad(key, `'${key}' must be an integer ≥ ${lo}`);
  }
  return v;
}

function text(content: unknown, param: string): string {
  if (typeof content === "string") return content;
  // content parts: only text parts are supported
  if (Array.isArray(content)) {
    return content.map((p, i) => {
      if (
        p && typeof p === "object" && (p as { type?: unknown }).type === "text" &&
        typeof (p as { text?: unknown }).text === "string"
      ) {
        return (p as { text: string }).text;
      }
      throw bad(`${param}[${i}]`, "only text content parts are supported");
    }).join("");
  }
  throw bad(param, "content must be a string or an array of text parts");
}

export function parseRequest(kind: "chat" | "completion", raw: unknown): GenerationRequest {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw bad("", "the body must be a JSON object");
  const b = raw as Record<string, unknown>;
  if (typeof b.model !== "string" || !b.model) throw bad("model", "'model' is required");
  let messages: ChatMessage[] | undefined;
  let prompt: string | undefined;
  if (kind === "chat") {
    if (!Array.isArray(b.messages) || b.messages.length === 0) {
      throw bad("messages", "'messages' must be a non-empty array");
    }
    messages = b.messages.map((m, i) => message(m, `messages[${i}]`));
  } else {
    const p = Array.isArray(b.prompt) && b.prompt.length === 1 ? b.prompt[0] : b.prompt;
    if (typeof p !== "string") throw bad("prompt", "'prompt' must be a string");
    prompt = p;
  }
  for (const [field, changes] of Object.entries(UNSUPPORTED)) {
    if (b[field] !== undefined && b[field] !== null && changes(b[field])) {
      throw bad(field, `'${field}' is not supported by this gateway`);
    }
  }
  const n = int(b, "n", 1) ?? 1;
  if (n > MAX_CHOICES) throw bad("n", `'n' must be from 1 to ${MAX_CHOICES}`);
  const { logprobs, topLogprobs } = kind === "chat" ? chatLogprobs(b) : completionLogprobs(b);
  let stop: string[] = [];
  if (typeof b.stop === "string") stop = [b.stop];
  else if (Array.isArray(b.stop)) {
    if (b.stop.length > 4 || !b.stop.every((s) => typeof s === "string" && s.length > 0)) {
      throw bad("stop", "'stop' must be up to 4 non-empty strings");
    }
    stop = b.stop as string[];
  } else if (b.stop !== undefined && b.stop !== null) {
    throw bad("stop", "'stop' must be a string or an array of strings");
  }
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== "boolean") {
    throw bad("stream", "'stream' must be a boolean");
  }
  const seed = int(b, "seed", 0);
  const tools = kind === "chat" ? toolsOf(b.tools) : [];
  if (kind === "completion" && b.tools !== undefined && b.tools !== null) {
    throw bad("tools", "'tools' is for /v1/chat/completions");
  }
  const toolChoice = toolChoiceOf(b.tool_choice, tools);
  if (
    b.parallel_tool_calls !== undefined && b.parallel_tool_calls !== null &&
    typeof b.parallel_tool_calls !== "boolean"
  ) {
    throw bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
  }
  const responseFormat = responseFormatOf(b.response_format);
  if (responseFormat.type !== "text" && tools.length && toolChoice !== "none") {
    throw bad("response_format", "'response_format' with 'tools' is not supported: the answer is either");
  }
  if (logprobs && tools.length && toolChoice !== "none") {
    throw bad("logprobs", "'logprobs' with 'tools' is not supported");
  }
  return {
    kind,
    model: b.model,
    messages,
    prompt,
    maxNewTokens: int(b, "max_completion_tokens", 1) ?? int(b, "max_tokens", 1),
    temperature: num(b, "temperature", 0, 2, 1),
    topP: num(b, "top_p", 0, 1, 1),
    topK: int(b, "top_k", 0) ?? 0,
    seed: BigInt(seed ?? Math.floor(Math.random() * 2 ** 31)),
    stop,
    stream: b.stream === true,
    includeUsage: (b.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true,
    minP: num(b, "min_p", 0, 1, 0),
    presencePenalty: num(b, "presence_penalty", -2, 2, 0),
    frequencyPenalty: num(b, "frequency_penalty", -2, 2, 0),
    repeatPenalty: num(b, "repeat_penalty", 0, 10, 1),
    logitBias: logitBias(b.logit_bias),
    logprobs,
    topLogprobs,
    n,
    tools,
    toolChoice,
    parallelToolCalls: b.parallel_tool_calls !== false,
    responseFormat,
  };
}

const obj = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

function message(m: unknown, at: string): ChatMessage {
  if (!obj(m)) throw bad(at, "a message must be an object");
  const role = m.role;
  if (role === "assistant" && Array.isArray(m.tool_calls) && m.tool_calls.length) {
    const toolCalls = m.tool_calls.map((c, i) => toolCall(c, `${at}.tool_calls[${i}]`));
    const content = m.content === null || m.content === undefined ? "" : text(m.content, `${at}.content`);
    return { role, content, toolCalls };
  }
  if (role === "tool") {
    if (typeof m.tool_call_id !== "string" || !m.tool_call_id) {
      throw bad(`${at}.tool_call_id`, "a tool message needs the 'tool_call_id' it answers");
    }
    return { role, content: text(m.content, `${at}.content`), toolCallId: m.tool_call_id };
  }
  if (role !== "system" && role !== "user" && role !== "assistant" && role !== "developer") {
    throw bad(`${at}.role`, "role must be system, developer, user, assistant or tool");
  }
  return { role, content: text(m.content, `${at}.content`) };
}

function toolCall(c: unknown, at: string): ToolCall {
  const f = obj(c) ? c.function : undefined;
  if (!obj(c) || c.type !== "function" || typeof c.id !== "string" || !obj(f)) {
    throw bad(at, 'a tool call is {id, type: "function", function: {name, arguments}}');
  }
  if (typeof f.name !== "string" || typeof f.arguments !== "string") {
    throw bad(`${at}.function`, "a tool call's function has a 'name' and 'arguments' (JSON text)");
  }
  return { id: c.id, name: f.name, arguments: f.arguments };
}

/** OpenAI's rule for function names. */
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function toolsOf(v: unknown): ToolSpec[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw bad("tools", "'tools' must be an array");
  if (v.length > 128) throw bad("tools", "'tools' may list up to 128 functions");
  const names = new Set<string>();
  return v.map((t, i) => {
    const f = obj(t) ? t.function : undefined;
    if (!obj(t) || t.type !== "function" || !obj(f)) {
      throw bad(`tools[${i}]`, 'a tool is {type: "function", function: {name, description, parameters}}');
    }
    if (typeof f.name !== "string" || !FUNCTION_NAME.test(f.name)) {
      throw bad(`tools[${i}].function.name`, "a function name is 1 to 64 letters, digits, _ or -");
    }
    if (names.has(f.name)) throw bad(`tools[${i}].function.name`, `'${f.name}' is listed twice`);
    names.add(f.name);
    if (f.description !== undefined && typeof f.description !== "string") {
      throw bad(`tools[${i}].function.description`, "a description must be a string");
    }
    if (f.parameters !== undefined && !obj(f.parameters)) {
      throw bad(`tools[${i}].function.parameters`, "parameters must be a JSON Schema object");
    }
    return {
      name: f.name,
      ...(f.description ? { description: f.description } : {}),
      parameters: (f.parameters as Record<string, unknown> | undefined) ?? { type: "object", properties: {} },
    };
  });
}

function toolChoiceOf(v: unknown, tools: readonly ToolSpec[]): ToolChoice {
  if (v === undefined || v === null) return tools.length ? "auto" : "none";
  if (v === "none" || v === "auto" || v === "required") {
    if (v === "required" && !tools.length) throw bad("tool_choice", "'required' needs 'tools'");
    return v;
  }
  const f = obj(v) ? v.function : undefined;
  if (obj(v) && v.type === "function" && obj(f) && typeof f.name === "string") {
    if (!tools.some((t) => t.name === f.name)) {
      throw bad("tool_choice", `'tool_choice' names '${f.name}', which 'tools' does not list`);
    }
    return { name: f.name };
  }
  throw bad("tool_choice", "'tool_choice' is none, auto, required or {type: \"function\", function: {name}}");
}

function responseFormatOf(v: unknown): ResponseFormat {
  if (v === undefined || v === null) return { type: "text" };
  if (!obj(v)) throw bad("response_format", "'response_format' must be an object");
  if (v.type === "text" || v.type === "json_object") return { type: v.type };
  if (v.type !== "json_schema") {
    throw bad("response_format.type", "'response_format.type' is text, json_object or json_schema");
  }
  const s = v.json_schema;
  if (!obj(s) || typeof s.name !== "string" || !FUNCTION_NAME.test(s.name)) {
    throw bad("response_format.json_schema", "json_schema needs a 'name' (1 to 64 letters, digits, _ or -)");
  }
  if (s.schema !== undefined && !obj(s.schema)) {
    throw bad("response_format.json_schema.schema", "'schema' must be a JSON Schema object");
  }
  return {
    type: "json_schema",
    name: s.name,
    schema: (s.schema as Record<string, unknown> | undefined) ?? { type: "object" },
    strict: s.strict === true,
  };
}

/** Chat: `logprobs` true, and `top_logprobs` alternatives (0–20) that need it. */
function chatLogprobs(b: Record<string, unknown>) {
  if (b.logprobs !== undefined && b.logprobs !== null && typeof b.logprobs !== "boolean") {
    throw bad("logprobs", "'logprobs' must be a boolean");
  }
  const logprobs = b.logprobs === true;
  const top = int(b, "top_logprobs", 0) ?? 0;
  if (top > 20) throw bad("top_logprobs", "'top_logprobs' must be an integer from 0 to 20");
  if (top > 0 && !logprobs) throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  return { logprobs, topLogprobs: top };
}

/** Completions: `logprobs` is the number of alternatives (0–5), null for none. */
function completionLogprobs(b: Record<string, unknown>) {
  const top = int(b, "logprobs", 0);
  if (top !== undefined && top > 5) throw bad("logprobs", "'logprobs' must be an integer from 0 to 5");
  return { logprobs: top !== undefined, topLogprobs: top ?? 0 };
}

/** `logit_bias`: token ids (as JSON keys) to biases from -100 to 100. */
function logitBias(v: unknown): { [token: number]: number } {
  if (v === undefined || v === null) return {};
  if (typeof v !== "object" || Array.isArray(v)) throw bad("logit_bias", "'logit_bias' must be an object");
  const out: { [token: number]: number } = {};
  for (const [k, bias] of Object.entries(v)) {
    const t = Number(k);
    if (!/^\d+$/.test(k) || !Number.isSafeInteger(t)) {
      throw bad("logit_bias", `'logit_bias' keys are token ids; got '${k}'`);
    }
    if (typeof bias !== "number" || !Number.isFinite(bias) || bias < -100 || bias > 100) {
      throw bad("logit_bias", `'logit_bias' values must be numbers from -100 to 100`);
    }
    out[t] = bias;
  }
  return out;
}
