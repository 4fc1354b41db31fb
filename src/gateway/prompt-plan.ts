// A request's prompt as token ids, what the sampling node must keep its answers to, and how an
// answer is read. JSON (response_format: any object, or a schema's) and the generic tool format
// (tool-format.ts) become a GBNF grammar by llama.cpp's converter; a model whose chat template
// knows tools gets llama.cpp's chat machinery instead (the template's own prompt, grammar and
// parser). Every refusal here comes before a route is taken.
import { EngineError } from "../engine/errors.ts";
import type { Tokenizer, ToolChat } from "../engine/tokenizer.ts";
import type { GrammarPolicy } from "../sampling/sampler.ts";
import { ApiError, type ChatMessage, type GenerationRequest } from "./openai.ts";
import { answerSchema, templateMessages } from "./tool-format.ts";

/** How an answer's text is read: as it is, in the generic tool format, or by the template's parser. */
export type AnswerFormat =
  | { readonly kind: "text" }
  | { readonly kind: "generic" }
  | {
    readonly kind: "template";
    readonly chat: ToolChat;
    readonly parser: string;
    /** at most one call (parallel_tool_calls false, or a named function) */
    readonly single: boolean;
  };

export interface PromptPlan {
  readonly ids: Int32Array;
  /** what every choice's tokens follow */
  readonly grammar?: GrammarPolicy;
  readonly answer: AnswerFormat;
  /** stop strings the answer's format adds to the request's */
  readonly stops: string[];
}

const TEXT: AnswerFormat = { kind: "text" };

export function planPrompt(tok: Tokenizer, req: GenerationRequest): PromptPlan {
  if (req.kind === "completion") {
    return {
      ids: tok.tokenize(req.prompt!, { addSpecial: true, parseSpecial: false }),
      answer: TEXT,
      stops: [],
    };
  }
  if (!tok.chatTemplate) {
    throw new ApiError(400, "this model has no chat template; use /v1/completions", "invalid_request_error");
  }
  const chatIds = (text: string) => tok.tokenize(text, { addSpecial: true, parseSpecial: true });
  const tools = req.tools.length > 0 && req.toolChoice !== "none";
  if (tools && tok.toolChat) return templatePlan(tok, tok.toolChat, req, chatIds);
  const ids = chatIds(tok.applyChat(templateMessages(req.messages!, req.tools, req.toolChoice)));
  const f = req.responseFormat;
  const schema = tools
    ? { schema: answerSchema(req.tools, req.toolChoice, req.parallelToolCalls), param: "tools" }
    : f.type === "json_object"
    ? { schema: { type: "object" }, param: "response_format" }
    : f.type === "json_schema"
    ? { schema: f.schema, param: "response_format.json_schema.schema" }
    : undefined;
  return {
    ids,
    grammar: schema && { gbnf: schemaGrammar(tok, schema.schema, schema.param) },
    answer: tools ? { kind: "generic" } : TEXT,
    stops: [],
  };
}

/** The template's own tool format: its prompt, its grammar (lazy until a call starts, with `auto`). */
function templatePlan(
  tok: Tokenizer,
  chat: ToolChat,
  req: GenerationRequest,
  chatIds: (text: string) => Int32Array,
): PromptPlan {
  // a named function: the only one offered, and required
  const named = typeof req.toolChoice === "object" ? req.toolChoice.name : undefined;
  const tools = req.tools.filter((t) => !named || t.name === named);
  let p;
  try {
    p = chat.apply({
      messages: req.messages!.map(openAiMessage),
      tools: tools.map((t) => ({ type: "function", function: t })),
      tool_choice: named ? "required" : req.toolChoice as string,
      parallel_tool_calls: req.parallelToolCalls && !named,
    });
  } catch (e) {
    if (!(e instanceof EngineError)) throw e;
    throw new ApiError(
      400,
      `the model's chat template cannot take these tools: ${e.message}`,
      "invalid_request_error",
      null,
      "tools",
    );
  }
  const grammar = p.grammar.gbnf ? p.grammar : undefined;
  if (grammar) check(tok, grammar, "tools");
  return {
    ids: chatIds(p.prompt),
    grammar,
    answer: { kind: "template", chat, parser: p.parser, single: !req.parallelToolCalls || !!named },
    stops: p.stops,
  };
}

/** A message as OpenAI's API (and llama.cpp's parser of it) has it. */
function openAiMessage(m: ChatMessage) {
  if (m.role === "tool") return { role: "tool", tool_call_id: m.toolCallId, content: m.content };
  if (m.toolCalls?.length) {
    return {
      role: "assistant",
      content: m.content || null,
      tool_calls: m.toolCalls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: c.arguments },
      })),
    };
  }
  return { role: m.role, content: m.content };
}

/** The schema's grammar, checked over the vocabulary; a schema it cannot take is the client's 400. */
function schemaGrammar(tok: Tokenizer, schema: unknown, param: string): string {
  let gbnf;
  try {
    gbnf = tok.schemaGrammar(schema);
  } catch (e) {
    if (!(e instanceof EngineError)) throw e;
    throw new ApiError(
      400,
      `the JSON Schema cannot be used: ${e.message}`,
      "invalid_request_error",
      null,
      param,
    );
  }
  check(tok, { gbnf }, param);
  return gbnf;
}

function check(tok: Tokenizer, grammar: GrammarPolicy, param: string): void {
  try {
    tok.checkGrammar(grammar);
  } catch (e) {
    if (!(e instanceof EngineError)) throw e;
    throw new ApiError(400, `the grammar cannot be used: ${e.message}`, "invalid_request_error", null, param);
  }
}
