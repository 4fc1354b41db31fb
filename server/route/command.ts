// `strata route`: one generation along a static route of nodes; `strata key new`: a route key.
import { cutRule } from "../../src/gguf/cut-points.ts";
import { contextCap, contextWindow } from "../../src/route/context-window.ts";
import { Command, InvalidArgumentError } from "commander";
import { parseSplit } from "../../src/engine/layer-range.ts";
import type { SamplingPolicy } from "../../src/route/route-session.ts";
import { importPrivateRouteKey, newRouteKeyText, type RouteKeyText } from "../../src/route/keys.ts";
import { NativeTokenizer } from "../engine/native/native-tokenizer.ts";
import { DEFAULT_MODEL } from "../model/default-model.ts";
import { fileFacts } from "../model/facts.ts";
import { resolveModel } from "../model/fetch.ts";
import { artifactSha256 } from "../model/hash.ts";
import { int, num, readJsonFile } from "../cli/options.ts";
import { StaticRoute } from "./static-route.ts";

export function keyCommand(): Command {
  const key = new Command("key").description("route signing keys");
  key.command("new")
    .description("write a new Ed25519 route key (nodes need only its public half)")
    .requiredOption("--out <file>", "where to write the key (JSON)")
    .option("--public-out <file>", "also write the public half alone here")
    .action(async (o) => {
      const k = await newRouteKeyText();
      await Deno.writeTextFile(o.out, JSON.stringify(k, null, 2) + "\n", { mode: 0o600 });
      if (o.publicOut) {
        await Deno.writeTextFile(
          o.publicOut,
          JSON.stringify({ algorithm: k.algorithm, public: k.public }) + "\n",
        );
      }
      console.log(JSON.stringify({ public: k.public }));
    });
  return key;
}

export function routeCommand(): Command {
  return new Command("route")
    .description("generate along a static route of nodes, streaming the text")
    .argument("<prompt>", "the prompt (a user message with --chat)")
    .requiredOption(
      "--nodes <urls>",
      "hop URLs in layer order: http://host:port or relay+ws://host:port/peer",
    )
    .requiredOption("--route-key <file>", "route key file with its private half")
    .option("--model <name|path>", `the model the nodes serve (for its tokenizer)`, DEFAULT_MODEL.name)
    .option("--split <ranges>", "each node's range, needed when a node is reached through a relay")
    .option("--relay <ws-url>", "relay for relay hops")
    .option("--relay-token <token>", "this client's relay token")
    .option("--chat", "wrap the prompt in the model's chat template")
    .option("--max-tokens <n>", "tokens to generate at most", int("max-tokens"), 64)
    .option("--temperature <t>", "0 = greedy", num("temperature"), 0)
    .option("--top-k <k>", "0 = off", num("top-k"), 0)
    .option("--top-p <p>", "1 = off", num("top-p"), 1)
    .option("--seed <n>", "sampling seed", "0")
    .option("--json", "print one JSON object with the text and telemetry")
    .action(async (prompt: string, o) => {
      const { path } = await resolveModel(o.model);
      const facts = await fileFacts(path);
      const tok = await NativeTokenizer.load(path);
      const keyText = await readJsonFile<RouteKeyText>(o.routeKey, "route key");
      if (o.relay && !o.relayToken) throw new InvalidArgumentError("--relay needs --relay-token");
      const route = await StaticRoute.connect({
        nodes: String(o.nodes).split(","),
        split: o.split ? parseSplit(o.split, facts.nLayer, cutRule(facts.header)) : undefined,
        nLayer: facts.nLayer,
        artifactSha256: await artifactSha256(path),
        key: await importPrivateRouteKey(keyText),
        relay: o.relay ? { url: o.relay, token: o.relayToken } : undefined,
      });
      try {
        const text = o.chat ? tok.applyChat([{ role: "user", content: prompt }]) : prompt;
        const ids = tok.tokenize(text, { addSpecial: !o.chat, parseSpecial: true });
        const sampling: SamplingPolicy = {
          temperature: o.temperature,
          topK: o.topK,
          topP: o.topP,
          seed: BigInt(o.seed),
        };
        const window = contextWindow(ids.length, o.maxTokens, contextCap(facts.nCtxTrain));
        if ("refused" in window) throw new InvalidArgumentError(window.refused);
        const session = await route.open(crypto.randomUUID(), { sampling, kvCells: window.kvCells });
        const out: number[] = [];
        const steps: number[] = [];
        const t0 = performance.now();
        let ttft = 0;
        let last;
        try {
          for await (const r of session.generate(ids, window.newTokens, (t) => tok.isEndOfGeneration(t))) {
            if (out.length === 0) ttft = performance.now() - t0;
            else steps.push(r.ms);
            last = r;
            if (tok.isEndOfGeneration(r.token)) break;
            out.push(r.token);
            if (!o.json) await Deno.stdout.write(new TextEncoder().encode(tok.piece(r.token)));
          }
        } finally {
          await session.release().catch(() => {});
        }
        const decodeS = steps.reduce((a, b) => a + b, 0) / 1000;
        const summary = {
          text: tok.detokenize(out),
          prompt_tokens: ids.length,
          completion_tokens: out.length,
          ttft_ms: ttft,
          decode_tokens_per_s: steps.length / (decodeS || Infinity),
          nodes: last?.telemetry.map((t) => ({
            node: t.node,
            layers: `${t.range?.start}:${t.range?.end}`,
            compute_ms: t.computeMs,
          })),
        };
        if (o.json) console.log(JSON.stringify(summary, null, 2));
        else {
          console.log();
          console.error(
            `${out.length} tokens; TTFT ${ttft.toFixed(0)} ms; decode ${
              summary.decode_tokens_per_s.toFixed(1)
            } tok/s over ${route.hops.length} nodes`,
          );
        }
      } finally {
        route.close();
        tok.close();
      }
    });
}
