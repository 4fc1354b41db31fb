// The chat page: a conversation streamed from the gateway's /v1/chat/completions, with a
// system prompt, temperature and length, stop and new chat, a meter of how much of the route's
// context the conversation holds, and under each reply (folded away) the route that served it
// with every node's share (steps, compute, bytes).
import { sseData } from "../../src/gateway/sse.ts";
import type { NodeShare } from "../../src/gateway/telemetry.ts";

interface Summary {
  route: string;
  ttft_ms: number | null;
  decode_tokens_per_s: number | null;
  nodes: NodeShare[];
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const log = $("log");
const keyInput = $<HTMLInputElement>("key");
const sendButton = $<HTMLButtonElement>("send");
const stopButton = $<HTMLButtonElement>("stop");
keyInput.value = localStorage.getItem("strata-key") ?? "";
let messages: { role: string; content: string }[] = [];
let model = "";
let contextLength = 0;
/** the reply streaming now: Stop aborts it */
let streaming: AbortController | undefined;

const headers = () => ({
  "content-type": "application/json",
  ...(keyInput.value ? { authorization: `Bearer ${keyInput.value}` } : {}),
});

function add(cls: string, text = ""): HTMLDivElement {
  const d = document.createElement("div");
  d.className = `msg ${cls}`;
  d.textContent = text;
  log.append(d);
  return d;
}

/** The route and every node's share, folded under its reply. */
function routeView(s: Summary): HTMLDetailsElement {
  const d = document.createElement("details");
  d.className = "route";
  d.dataset.route = s.route;
  const summary = document.createElement("summary");
  summary.textContent = `route ${s.route} · TTFT ${s.ttft_ms?.toFixed(0) ?? "–"} ms · ${
    s.decode_tokens_per_s?.toFixed(1) ?? "–"
  } tok/s`;
  const table = document.createElement("table");
  table.innerHTML = "<tr><th>node</th><th>layers</th><th>steps</th><th>compute ms</th><th>queue ms</th>" +
    "<th>KiB in</th><th>KiB out</th></tr>";
  for (const n of s.nodes) {
    const row = table.insertRow();
    for (
      const v of [
        n.node,
        n.layers,
        String(n.steps),
        n.compute_ms.toFixed(0),
        n.queue_ms.toFixed(0),
        (n.bytes_in / 1024).toFixed(1),
        (n.bytes_out / 1024).toFixed(1),
      ]
    ) row.insertCell().textContent = v;
  }
  d.append(summary, table);
  return d;
}

/** The meter: tokens the conversation holds (the last reply's usage) of the route's context. */
function meter(tokens: number): void {
  const used = $<HTMLProgressElement>("used");
  used.max = contextLength || 1;
  used.value = Math.min(tokens, used.max);
  $("used-text").textContent = contextLength
    ? `${tokens.toLocaleString()} of ${contextLength.toLocaleString()} tokens`
    : `${tokens.toLocaleString()} tokens`;
}

/** The model and its context; a 401 asks for the key (and is asked again before sending). */
async function loadModel(): Promise<void> {
  const r = await fetch("/v1/models", { headers: headers() });
  if (r.status === 401) {
    $("keyline").classList.add("needed");
    $("model").textContent = "API key needed";
    return;
  }
  $("keyline").classList.remove("needed");
  const j = await r.json();
  model = j.data?.[0]?.id ?? "";
  contextLength = j.data?.[0]?.context_length ?? 0;
  $("model").textContent = model ? `model ${model}` : `models: ${r.status}`;
  meter(0);
}

async function send(text: string): Promise<void> {
  if (!model) await loadModel();
  const system = $<HTMLTextAreaElement>("system").value.trim();
  if (messages.length === 0 && system) {
    messages.push({ role: "system", content: system });
    add("system", system);
  }
  messages.push({ role: "user", content: text });
  add("user", text);
  const out = add("assistant");
  streaming = new AbortController();
  let reply = "";
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(),
      signal: streaming.signal,
      body: JSON.stringify({
        model,
        messages,
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: Number($<HTMLInputElement>("max-tokens").value) || 256,
        temperature: Number($<HTMLInputElement>("temperature").value) || 0,
      }),
    });
    if (!res.ok || !res.body) {
      out.classList.add("error");
      out.textContent = `${res.status}: ${
        (await res.json().catch(() => ({})))?.error?.message ?? res.statusText
      }`;
      if (res.status === 401) $("keyline").classList.add("needed");
      messages.pop();
      return;
    }
    for await (const data of sseData(res.body)) {
      if (data === "[DONE]") break;
      const j = JSON.parse(data);
      if (j.error) {
        out.classList.add("error");
        out.textContent = `${reply}\n[${j.error.code ?? j.error.type}: ${j.error.message}]`;
        return;
      }
      const piece = j.choices?.[0]?.delta?.content;
      if (piece) out.textContent = reply += piece;
      if (j.strata) out.after(routeView(j.strata as Summary));
      if (j.usage) meter(j.usage.total_tokens);
    }
    out.dataset.done = "1";
  } catch (e) {
    if (!streaming.signal.aborted) throw e;
    // stopped: what came so far stays, and the conversation goes on from it
    out.classList.add("stopped");
    out.dataset.done = "1";
  } finally {
    streaming = undefined;
  }
  messages.push({ role: "assistant", content: reply });
}

$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  localStorage.setItem("strata-key", keyInput.value);
  const p = $<HTMLTextAreaElement>("prompt");
  const text = p.value.trim();
  if (!text || streaming) return;
  p.value = "";
  sendButton.disabled = true;
  stopButton.disabled = false;
  void send(text).catch((e) => add("error", String(e))).finally(() => {
    sendButton.disabled = false;
    stopButton.disabled = true;
  });
});

stopButton.addEventListener("click", () => streaming?.abort());

$("new-chat").addEventListener("click", () => {
  streaming?.abort();
  messages = [];
  log.replaceChildren();
  meter(0);
});

keyInput.addEventListener("change", () => {
  localStorage.setItem("strata-key", keyInput.value);
  void loadModel();
});

void loadModel();
