// llama-server's token endpoints, with the model's own tokenizer: POST /tokenize {content,
// add_special?} → {tokens}, POST /detokenize {tokens} → {content}.
import type { Hono } from "hono";
import type { Tokenizer } from "../../src/engine/tokenizer.ts";
import { ApiError } from "../../src/gateway/openai.ts";

export function tokenRoutes(app: Hono, tokenizer: Tokenizer): void {
  app.post("/tokenize", async (c) => {
    const b = await c.req.json().catch(() => undefined) as
      | { content?: unknown; add_special?: unknown }
      | undefined;
    if (typeof b?.content !== "string") {
      throw new ApiError(400, "'content' must be a string", undefined, null, "content");
    }
    const ids = tokenizer.tokenize(b.content, { addSpecial: b.add_special === true, parseSpecial: false });
    return c.json({ tokens: [...ids] });
  });
  app.post("/detokenize", async (c) => {
    const b = await c.req.json().catch(() => undefined) as { tokens?: unknown } | undefined;
    const ids = b?.tokens;
    if (!Array.isArray(ids) || !ids.every((t) => Number.isInteger(t) && t >= 0 && t < tokenizer.nVocab)) {
      throw new ApiError(
        400,
        `'tokens' must be token ids below ${tokenizer.nVocab}`,
        undefined,
        null,
        "tokens",
      );
    }
    return c.json({ content: tokenizer.detokenize(ids as number[]) });
  });
}
