// The OpenAI API's request shapes as the gateway accepts them, and its error shape.
// Parsing never trusts the body: every field is checked and a clear error names it.

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
  readonly role: "system" | "user" | "assistant" | "developer";
  readonly content: string;
}

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
  tools: (v) => Array.isArray(v) && v.length > 0,
  tool_choice: (v) => v !== "none" && v !== "auto",
  functions: (v) => Array.isArray(v) && v.length > 0,
  function_call: (v) => v !== "none" && v !== "auto",
  response_format: (v) => !(v && typeof v === "object" && (v as { type?: unknown }).type === "text"),
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
    messages = b.messages.map((m, i) => {
      if (!m || typeof m !== "object") throw bad(`messages[${i}]`, "a message must be an object");
      const role = (m as { role?: unknown }).role;
      if (role !== "system" && role !== "user" && role !== "assistant" && role !== "developer") {
        throw bad(`messages[${i}].role`, "role must be system, developer, user or assistant");
      }
      return { role, content: text((m as { content?: unknown }).content, `messages[${i}].content`) };
    });
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
