// The OpenAI response shapes for one request: streamed chunks and the whole completion, chat or
// text, with usage and logprobs. The gateway's HTTP side only writes what these return.
import type { Generated, TokenLogprobs } from "./generation.ts";
import type { GenerationRequest, ToolCall } from "./openai.ts";
import type { AnswerFormat } from "./prompt-plan.ts";
import { newCallId, readAnswer, type ToolAnswer } from "./tool-format.ts";

export interface Usage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
  /** prompt tokens the route's shards held already (prefix reuse), as OpenAI reports its cache */
  readonly prompt_tokens_details: { readonly cached_tokens: number };
}

export const usageOf = (promptTokens: number, completionTokens: number, cachedTokens = 0): Usage => ({
  prompt_tokens: promptTokens,
  completion_tokens: completionTokens,
  total_tokens: promptTokens + completionTokens,
  prompt_tokens_details: { cached_tokens: cachedTokens },
});

export type FinishReason = "stop" | "length" | "tool_calls";

/** One choice's whole answer. */
export interface ChoiceAnswer {
  readonly text: string;
  readonly finishReason: FinishReason;
  readonly logprobs: TokenLogprobs[];
  /** the calls it makes (then `text` is "" and the message's content null) */
  readonly toolCalls?: ToolCall[];
}

/** A generation as its choice's answer: in a tool format, read into calls or text. */
export function choiceAnswer(g: Generated, format: AnswerFormat): ChoiceAnswer {
  if (format.kind === "text") return g;
  const a = format.kind === "generic" ? readAnswer(g.text) : templateAnswer(format, g.text);
  if (!a.toolCalls.length) return { text: a.content ?? "", finishReason: g.finishReason, logprobs: [] };
  // a cut answer does not parse: only a whole one has calls
  return { text: "", finishReason: "tool_calls", logprobs: [], toolCalls: a.toolCalls };
}

/** The template's parser (llama.cpp's); a text it cannot read stays text. */
function templateAnswer(format: Extract<AnswerFormat, { kind: "template" }>, text: string): ToolAnswer {
  let parsed;
  try {
    parsed = format.chat.parse(format.parser, text);
  } catch {
    return { content: text, toolCalls: [] };
  }
  // llama.cpp's grammar for a template may let a second call through where one was asked for
  const calls = format.single ? parsed.toolCalls.slice(0, 1) : parsed.toolCalls;
  const toolCalls = calls.map((c) => ({ id: newCallId(), name: c.name, arguments: c.arguments }));
  return { content: toolCalls.length ? null : parsed.content, toolCalls };
}

/** One request's id, creation time and model, and the objects its answer is made of. */
export class ResponseShape {
  readonly id: string;
  readonly created = Math.floor(Date.now() / 1000);

  constructor(readonly req: GenerationRequest, readonly model: string) {
    this.id = `${req.kind === "chat" ? "chatcmpl" : "cmpl"}-${crypto.randomUUID()}`;
  }

  /**
   * A streamed chunk of choice `index`: the role (chat, first), a piece of text with its tokens'
   * logprobs, or the end with its reason.
   */
  chunk(index: number, text: string | null, finish: FinishReason | null, o: ChunkExtras = {}) {
    const head = { id: this.id, created: this.created, model: this.model };
    if (this.req.kind === "chat") {
      const delta = text === null ? {} : o.role ? { role: "assistant", content: text } : { content: text };
      return {
        ...head,
        object: "chat.completion.chunk",
        choices: [{
          index,
          delta,
          ...(this.req.logprobs && o.logprobs?.length ? { logprobs: this.#chatLogprobs(o.logprobs) } : {}),
          finish_reason: finish,
        }],
      };
    }
    return {
      ...head,
      object: "text_completion",
      choices: [{
        index,
        text: text ?? "",
        finish_reason: finish,
        logprobs: this.req.logprobs ? this.#textLogprobs(o.logprobs ?? [], o.offset ?? 0) : null,
      }],
    };
  }

  /** A streamed chunk of a chat choice's tool calls, each whole. */
  toolCallsChunk(index: number, calls: readonly ToolCall[]) {
    const chunk = this.chunk(index, null, null);
    const tool_calls = calls.map((c, i) => ({ index: i, ...toolCallObject(c) }));
    return { ...chunk, choices: [{ ...chunk.choices[0], delta: { tool_calls } }] };
  }

  /** The last streamed chunk (`stream_options.include_usage`): no choices, the usage. */
  usageChunk(usage: Usage) {
    return { ...this.chunk(0, null, null), choices: [], usage };
  }

  /** The whole answer of a request that did not stream. */
  completion(answers: readonly ChoiceAnswer[], usage: Usage) {
    const choices = answers.map((a, index) =>
      this.req.kind === "chat"
        ? {
          index,
          message: a.toolCalls?.length
            ? { role: "assistant", content: null, tool_calls: a.toolCalls.map(toolCallObject) }
            : { role: "assistant", content: a.text },
          logprobs: this.req.logprobs ? this.#chatLogprobs(a.logprobs) : null,
          finish_reason: a.finishReason,
        }
        : {
          index,
          text: a.text,
          finish_reason: a.finishReason,
          logprobs: this.req.logprobs ? this.#textLogprobs(a.logprobs, 0) : null,
        }
    );
    return {
      id: this.id,
      object: this.req.kind === "chat" ? "chat.completion" : "text_completion",
      created: this.created,
      model: this.model,
      choices,
      usage,
    };
  }

  #chatLogprobs(entries: readonly TokenLogprobs[]) {
    return {
      content: entries.map((e) => ({
        token: e.token,
        logprob: e.logprob,
        bytes: e.bytes,
        top_logprobs: e.top.slice(0, this.req.topLogprobs),
      })),
    };
  }

  /** The legacy completions shape; `offset`: where this chunk's text starts in the answer. */
  #textLogprobs(entries: readonly TokenLogprobs[], offset: number) {
    const textOffset: number[] = [];
    let at = offset;
    for (const e of entries) {
      textOffset.push(at);
      at += e.token.length;
    }
    return {
      tokens: entries.map((e) => e.token),
      token_logprobs: entries.map((e) => e.logprob),
      top_logprobs: entries.map((e) => Object.fromEntries(e.top.map((t) => [t.token, t.logprob]))),
      text_offset: textOffset,
    };
  }
}

export interface ChunkExtras {
  /** chat: the first chunk names the role */
  readonly role?: boolean;
  /** the tokens whose text this chunk carries */
  readonly logprobs?: readonly TokenLogprobs[];
  /** completions: where this chunk's text starts in the whole answer */
  readonly offset?: number;
}

const toolCallObject = (c: ToolCall) => ({
  id: c.id,
  type: "function",
  function: { name: c.name, arguments: c.arguments },
});
