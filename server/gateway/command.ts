// `strata gateway`: the OpenAI-compatible edge; `strata chat`: one streamed chat through it.
import { Command, InvalidArgumentError } from "commander";
import { DEFAULT_MODEL } from "../model/default-model.ts";
import { openModelHeader } from "../artifacts/model-header.ts";
import { cacheDir } from "../process/paths.ts";
import { count, hostPort, int, num, publicUrl, untilSignal } from "../cli/options.ts";
import { startGateway } from "./app.ts";
import type { VolunteerOptions } from "./volunteer.ts";
import { parseSplit } from "../../src/engine/layer-range.ts";
import { sseData } from "../../src/gateway/sse.ts";
import type { NetworkState } from "../../src/gateway/network-view.ts";
import { type GatewayHealth, statusText } from "../../src/gateway/status-text.ts";
import { DEFAULT_REQUEST_QUEUE } from "../../src/gateway/request-queue.ts";
import { addClientLimitOptions, clientLimitsOf } from "./limit-options.ts";
import { addCaOption, addCertFileOptions, tlsOf } from "../tls/options.ts";
import { trustCaFile, trustedFetch } from "../../node-apis/tls/trust.ts";
import { addSecretOption, needSecret, NODE_TOKEN, RELAY_SECRET, RELAY_TOKEN } from "../cli/secrets.ts";

const collect = (v: string, all: string[] = []) => [...all, v];

export function gatewayCommand(): Command {
  const gateway = addCaOption(
    addCertFileOptions(addClientLimitOptions(new Command("gateway")), "the OpenAI API"),
  );
  addSecretOption(gateway, RELAY_TOKEN, "the gateway's relay token");
  addSecretOption(gateway, RELAY_SECRET, "the relay's secret: mints volunteer tabs' relay tokens");
  addSecretOption(gateway, NODE_TOKEN, "the tracker's node token, used for volunteer tabs");
  return gateway
    .description(
      "the OpenAI API (chat/completions, completions, models; SSE streaming) over tracker-chosen routes",
    )
    .option(
      "--model <name|path|url>",
      "the model served: a name, a GGUF, or an origin's artifact URL (…/artifacts/<sha256>: only its header " +
        "is fetched, for the tokenizer and chat template)",
      DEFAULT_MODEL.name,
    )
    .option(
      "--name <id>",
      "the model's id in the API (default: its catalog or file name, or the header's name)",
    )
    .requiredOption(
      "--tracker <url[,url…]>",
      "the tracker that picks routes (replicas, comma-separated: the next when one fails)",
    )
    .option("--listen <host:port>", "where clients connect", "127.0.0.1:8080")
    .option("--public-url <url>", "where clients and volunteers reach it (default: --listen)")
    .option(
      "--api-key <key>",
      "require this bearer key (repeat for several; or STRATA_API_KEYS=a,b)",
      collect,
    )
    .option("--relay <ws-url>", "relay for nodes reachable only through it")
    .option(
      "--public-relay <ws-url>",
      "the relay as browsers and other owners' nodes reach it, given to volunteer tabs (default: --relay)",
    )
    .option(
      "--volunteers <ranges>",
      "serve the volunteer page (/volunteer/) offering these layer ranges, e.g. 0:10,10:20,20:30, " +
        "or auto: the tracker places each tab (needs --relay, --relay-secret and the node token)",
    )
    .option(
      "--queue-max <n>",
      "requests that may wait while every route is busy; past it a request gets 429",
      int("queue-max"),
      DEFAULT_REQUEST_QUEUE.maxWaiting,
    )
    .option(
      "--queue-timeout-ms <n>",
      "the longest a request waits for a busy route before it gets 429",
      int("queue-timeout-ms"),
      DEFAULT_REQUEST_QUEUE.timeoutMs,
    )
    .option(
      "--repair-deadline-ms <n>",
      "a stream whose route lost a node waits this long for another route to take over before it ends with an error",
      int("repair-deadline-ms"),
      30_000,
    )
    .option(
      "--cors <origins>",
      "let browser pages of these origins call /v1, /tokenize and /detokenize (comma-separated, or *)",
    )
    .option(
      "--no-prefix-reuse",
      "prefill every prompt whole: no prompt starts from the KV its route's shards kept, and none is kept",
    )
    .option(
      "--kv-mirror <n>",
      "once a prompt of at least <n> positions is in, its route's shards send their KV to standby nodes of their ranges; a repair that loses a node then takes its standby and rebuilds only past the snapshot (0: off)",
      count("kv-mirror"),
      0,
    )
    .option(
      "--no-repair-resume",
      "repairs re-prefill the whole new route instead of rebuilding only the lost hop (to compare)",
    )
    .action(async (o) => {
      const { host, port } = hostPort(o.listen);
      const keys = [
        ...(o.apiKey ?? []),
        ...(Deno.env.get("STRATA_API_KEYS")?.split(",").filter(Boolean) ?? []),
      ];
      const relayToken = o.relay ? needSecret(o, RELAY_TOKEN, "--relay: ") : undefined;
      const tls = await tlsOf(o);
      const held = await openModelHeader(o.model, { headerFile: true });
      const model = o.name ? { ...held, name: String(o.name) } : held;
      let volunteer: VolunteerOptions | undefined;
      if (o.volunteers) {
        if (!o.relay) throw new InvalidArgumentError("--volunteers needs --relay");
        const relaySecret = needSecret(o, RELAY_SECRET, "--volunteers: ");
        const nodeToken = needSecret(o, NODE_TOKEN, "--volunteers: ");
        // auto: no split; the tracker places each tab
        const split = o.volunteers === "auto" ? [] : parseSplit(o.volunteers, model.manifest.nLayer);
        volunteer = { relayUrl: o.publicRelay ?? o.relay, relaySecret, nodeToken, split };
      }
      const g = await startGateway({
        volunteer,
        model,
        trackerUrl: o.tracker,
        apiKeys: keys,
        relay: o.relay ? { url: o.relay, token: relayToken! } : undefined,
        host,
        port,
        admission: { maxWaiting: o.queueMax, timeoutMs: o.queueTimeoutMs },
        repairDeadlineMs: o.repairDeadlineMs,
        repairResume: o.repairResume !== false,
        prefixReuse: o.prefixReuse !== false,
        kvMirror: o.kvMirror,
        clientLimits: clientLimitsOf(o),
        tls,
        corsOrigins: o.cors ? String(o.cors).split(",").map((x: string) => x.trim()).filter(Boolean) : [],
      });
      console.log(JSON.stringify({ event: "ready", url: publicUrl(o.publicUrl, g.url), pid: Deno.pid }));
      await untilSignal();
      await g.close();
      Deno.exit(0);
    });
}

/** Where `strata up` leaves the address of its gateway. */
export const upStateFile = () => cacheDir("up.json");

/** The gateway a client command talks to: --url, else the one `strata up` started, else :8080. */
async function gatewayOf(o: { url?: string; ca?: string }) {
  let url = o.url;
  let ca = o.ca;
  if (!url) {
    try {
      const up = JSON.parse(await Deno.readTextFile(upStateFile()));
      url = up.gateway as string;
      ca ??= up.ca; // a `strata up --tls` network's CA
    } catch {
      url = "http://127.0.0.1:8080";
    }
  }
  await trustCaFile(ca);
  return { url: url!, fetch: trustedFetch() };
}

export function statusCommand(): Command {
  return addCaOption(new Command("status"))
    .description(
      "a network as its operator sees it, from a gateway: nodes (layers, engine, memory under the cap, speed), " +
        "coverage, free session slots, routes in use",
    )
    .option("--url <gateway>", "gateway URL (default: the one `strata up` started)")
    .option("--json", "print the gateway's state and health as one JSON object")
    .action(async (o) => {
      const { url, fetch } = await gatewayOf(o);
      const state = await fetch(`${url}/network/api/state`);
      if (!state.ok) throw new Error(`${url}/network/api/state: ${state.status} ${await state.text()}`);
      const s = await state.json() as NetworkState;
      // 503 is an answer here: the reason the network does not serve
      const health = await (await fetch(`${url}/health`)).json() as GatewayHealth;
      console.log(o.json ? JSON.stringify({ state: s, health }, null, 2) : statusText(s, health));
    });
}

export function chatCommand(): Command {
  return addCaOption(new Command("chat"))
    .description("one chat completion through a gateway, streamed (default: the one `strata up` started)")
    .argument("<message>", "the user message")
    .option("--url <gateway>", "gateway URL")
    .option("--api-key <key>", "bearer key (or STRATA_API_KEY)")
    .option("--max-tokens <n>", "tokens to generate at most", int("max-tokens"), 256)
    .option("--temperature <t>", "0 = greedy", num("temperature"), 0)
    .option("--system <text>", "a system message first")
    .action(async (message: string, o) => {
      const { url, fetch } = await gatewayOf(o);
      const key = o.apiKey ?? Deno.env.get("STRATA_API_KEY");
      const models = await fetch(`${url}/v1/models`, {
        headers: key ? { authorization: `Bearer ${key}` } : {},
      });
      if (!models.ok) throw new Error(`${url}: ${models.status} ${await models.text()}`);
      const model = (await models.json()).data[0].id;
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({
          model,
          stream: true,
          max_tokens: o.maxTokens,
          temperature: o.temperature,
          messages: [...(o.system ? [{ role: "system", content: o.system }] : []), {
            role: "user",
            content: message,
          }],
        }),
      });
      if (!res.ok || !res.body) throw new Error(`${res.status}: ${await res.text()}`);
      const enc = new TextEncoder();
      let telemetry: Record<string, unknown> | undefined;
      for await (const data of sseData(res.body)) {
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(`${j.error.code ?? j.error.type}: ${j.error.message}`);
        const piece = j.choices?.[0]?.delta?.content;
        if (piece) await Deno.stdout.write(enc.encode(piece));
        if (j.strata) telemetry = j.strata;
      }
      await Deno.stdout.write(enc.encode("\n"));
      if (telemetry) {
        const t = telemetry as { ttft_ms: number; decode_tokens_per_s: number | null; route: string };
        console.error(
          `TTFT ${t.ttft_ms?.toFixed(0)} ms, decode ${
            t.decode_tokens_per_s?.toFixed(1) ?? "-"
          } tok/s, route ${t.route}`,
        );
      }
    });
}
