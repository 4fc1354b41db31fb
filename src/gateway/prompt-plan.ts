// A request's prompt as token ids, and what the sampling node must keep its answers to: JSON
// (response_format: any object, or a schema's) or the generic tool format (tool-format.ts), as
// a GBNF grammar made by llama.cpp's converter. Every refusal here comes before a route is taken.
import { EngineError } from "../engine/errors.ts";
import type { Tokenizer } from "../engine/tokenizer.ts";
import { ApiError, type GenerationRequest } from "./openai.ts";
import { answerSchema, templateMessages } from "./tool-format.ts";

export interface PromptPlan {
  readonly ids: Int32Array;
  /** GBNF for every choice's tokens */
  readonly grammar?: string;
  /** the answers are in the generic tool format: read into tool calls at the end */
  readonly toolFormat: boolean;
}

export function planPrompt(tok: Tokenizer, req: GenerationRequest): PromptPlan {
  if (req.kind === "completion") {
    return { ids: tok.tokenize(req.prompt!, { addSpecial: true, parseSpecial: false }), toolFormat: false };
  }
  if (!tok.chatTemplate) {
    throw new ApiError(400, "this model has no chat template; use /v1/completions", "invalid_request_error");
  }
  const toolFormat = req.tools.length > 0 && req.toolChoice !== "none";
  const messages = templateMessages(req.messages!, req.tools, req.toolChoice);
  const ids = tok.tokenize(tok.applyChat(messages), { addSpecial: true, parseSpecial: true });
  const f = req.responseFormat;
  if (toolFormat) {
    return {
      ids,
      toolFormat,
      grammar: grammarOf(tok, answerSchema(req.tools, req.toolChoice, req.parallelToolCalls), "tools"),
    };
  }
  if (f.type === "json_object") {
    return { ids, toolFormat, grammar: grammarOf(tok, { type: "object" }, "response_format") };
  }
  if (f.type === "json_schema") {
    return { ids, toolFormat, grammar: grammarOf(tok, f.schema, "response_format.json_schema.schema") };
  }
  return { ids, toolFormat };
}

/** The schema's grammar, checked over the vocabulary; a schema it cannot take is the client's 400. */
function grammarOf(tok: Tokenizer, schema: unknown, param: string): string {
  try {
    const grammar = tok.schemaGrammar(schema);
    tok.checkGrammar(grammar);
    return grammar;
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
}
