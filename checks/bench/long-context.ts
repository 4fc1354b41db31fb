// Long contexts as a user meets them, through the official `openai` npm client on `strata up`
// with its defaults: one chat whose prompt holds `longTokens` tokens, whose greedy text must
// equal whole-model llama.cpp's for the same tokens; then `concurrent` streamed chats of
// `concurrentTokens`-token prompts at once, each equal byte for byte to its prompt answered
// alone; afterwards every node must hold 0 sessions and 0 KV cells. Reports what it saw (the
// check of `strata bench long-context` and of the suite's small case); asserts nothing itself.
import OpenAI from "openai";
import { NativeTokenizer } from "../../server/engine/native/native-tokenizer.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";
import { GrpcSeams } from "../../node-apis/seam/grpc.ts";
import { wholeGreedy } from "../engine-host/whole-greedy.ts";

export interface LongContextOptions {
  readonly modelPath: string;
  readonly modelName: string;
  readonly longTokens: number;
  readonly concurrent: number;
  readonly concurrentTokens: number;
  readonly maxTokens: number;
  /** more arguments for `strata up` (its defaults when empty) */
  readonly upArgs?: readonly string[];
  readonly progress?: (s: string) => void;
}

const WORDS = (
  "river lantern orbit meadow copper violin harbor glacier pepper canyon whisper ledger " +
  "falcon marble tundra saddle comet willow anchor prism thistle beacon quartz mosaic"
).split(" ");

/** A user message of varied sentences whose chat prompt is at least `tokens` tokens. */
function messageOf(tok: NativeTokenizer, tokens: number, salt: number): { content: string; ids: Int32Array } {
  const sentences: string[] = [];
  let content = "";
  let ids: Int32Array = new Int32Array();
  for (let i = 0; ids.length < tokens; i++) {
    // a batch of sentences between each count: tokenizing grows with the text
    for (let k = 0; k < 16; k++, i++) {
      const w = (n: number) => WORDS[(i * 7 + n * 13 + salt * 31) % WORDS.length];
      sentences.push(`Note ${salt}.${i}: the ${w(0)} near the ${w(1)} keeps a ${w(2)} for the ${w(3)}.`);
    }
    content = `${sentences.join(" ")}\nWhich word appears in the first note?`;
    ids = tok.tokenize(tok.applyChat([{ role: "user", content }]), { addSpecial: true, parseSpecial: true });
  }
  return { content, ids };
}

export async function benchLongContext(o: LongContextOptions) {
  const say = o.progress ?? (() => {});
  const tok = await NativeTokenizer.load(o.modelPath);
  const long = messageOf(tok, o.longTokens, 0);
  const shorter = Array.from({ length: o.concurrent }, (_, i) => messageOf(tok, o.concurrentTokens, i + 1));
  say(`whole-model llama.cpp on the ${long.ids.length}-token prompt`);
  const [reference] = await wholeGreedy(
    o.modelPath,
    [long.ids],
    o.maxTokens,
    (t) => tok.isEndOfGeneration(t),
  );
  const referenceText = tok.detokenize(
    reference.map((s) => s.token).filter((t) => !tok.isEndOfGeneration(t)),
  );

  say("strata up");
  const net = await ServiceProcess.start(
    "strata up",
    ["up", "--port", "0", ...(o.upArgs ?? [])],
    {},
    600_000,
  );
  const client = new OpenAI({
    baseURL: `${net.ready.gateway}/v1`,
    apiKey: "none",
    maxRetries: 0,
    timeout: 3_600_000,
  });
  const seams = new GrpcSeams();
  const chat = async (content: string, stream: boolean) => {
    const t0 = performance.now();
    try {
      const body = {
        model: o.modelName,
        messages: [{ role: "user" as const, content }],
        temperature: 0,
        max_tokens: o.maxTokens,
      };
      if (!stream) {
        const r = await client.chat.completions.create(body);
        return {
          text: r.choices[0].message.content ?? "",
          finish: r.choices[0].finish_reason,
          promptTokens: r.usage?.prompt_tokens ?? 0,
          ms: performance.now() - t0,
        };
      }
      const s = await client.chat.completions.create({ ...body, stream: true });
      let text = "";
      let finish: string | null = null;
      let firstMs: number | undefined;
      for await (const chunk of s) {
        const piece = chunk.choices[0]?.delta?.content ?? "";
        if (piece) firstMs ??= performance.now() - t0;
        text += piece;
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      return { text, finish, ttftMs: firstMs, ms: performance.now() - t0 };
    } catch (e) {
      return {
        text: "",
        finish: null,
        error: e instanceof Error ? e.message : String(e),
        ms: performance.now() - t0,
      };
    }
  };
  try {
    const models = await client.models.list();
    const contextLength = (models.data[0] as unknown as { context_length?: number }).context_length;
    say(`one chat of ${long.ids.length} prompt tokens`);
    const longChat = await chat(long.content, false);
    say(`${o.concurrent} prompts of ${shorter[0].ids.length}+ tokens, each alone`);
    const alone: Awaited<ReturnType<typeof chat>>[] = [];
    for (const m of shorter) alone.push(await chat(m.content, true));
    say(`the same ${o.concurrent} at once, streamed`);
    const t0 = performance.now();
    const together = await Promise.all(shorter.map((m) => chat(m.content, true)));
    const togetherMs = performance.now() - t0;
    // the last releases reach every node a moment after the last reply
    await new Promise((r) => setTimeout(r, 500));
    const nodeUrls = (net.ready.nodes as Array<{ url: string }>).map((n) => n.url);
    const infos = await Promise.all(nodeUrls.map((u) => seams.info(u, 5000)));
    return {
      model: o.modelName,
      context_length: contextLength,
      long: {
        prompt_tokens: long.ids.length,
        gateway_prompt_tokens: "promptTokens" in longChat ? longChat.promptTokens : 0,
        text: longChat.text,
        reference: referenceText,
        equal: longChat.text === referenceText,
        finish: longChat.finish,
        error: "error" in longChat ? longChat.error : undefined,
        ms: longChat.ms,
      },
      concurrent: {
        sessions: o.concurrent,
        prompt_tokens: shorter.map((m) => m.ids.length),
        completed: together.filter((c) => c.finish && !("error" in c && c.error)).length,
        errors: together.map((c) => ("error" in c ? c.error : undefined)).filter(Boolean),
        differing: together.map((c, i) => ({ i, text: c.text, alone: alone[i].text }))
          .filter((c) => c.text !== c.alone),
        alone_errors: alone.map((c) => ("error" in c ? c.error : undefined)).filter(Boolean),
        wall_ms: togetherMs,
        ttft_ms: together.map((c) => ("ttftMs" in c ? c.ttftMs : undefined)),
      },
      nodes_after: infos.map((i) => ({
        node: i.node,
        sessions: i.sessions,
        kv_cells: i.kvCells,
        kv_cells_used: i.kvCellsUsed,
        // finished chats' KV kept for the prompts that extend them
        prefix_cells: i.prefix?.cells ?? 0,
        kv_layout: i.kvLayout,
        batches: Number(i.batches),
        graph_passes: Number(i.graphPasses),
        max_batch_sessions: i.maxBatchSessions,
      })),
    };
  } finally {
    await net.stop();
  }
}
