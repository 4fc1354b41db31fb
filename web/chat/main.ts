// The chat page: a conversation streamed from the gateway's /v1/chat/completions, and under
// each reply the route that served it with every node's share (steps, compute, bytes).
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
keyInput.value = localStorage.getItem("strata-key") ?? "";
const messages: { role: string; content: string }[] = [];
let model = "";

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

function routeView(s: Summary): HTMLDivElement {
  const d = document.createElement("div");
  d.className = "route";
  d.dataset.route = s.route;
  const rows = s.nodes.map((n) =>
    `<tr><td style="text-align:left">${n.node}</td><td>${n.layers}</td><td>${n.steps}</td><td>${
      n.compute_ms.toFixed(0)
    }</td><td>${n.queue_ms.toFixed(0)}</td><td>${(n.bytes_in / 1024).toFixed(1)}</td><td>${
      (n.bytes_out / 1024).toFixed(1)
    }</td></tr>`
  ).join("");
  d.innerHTML = `route <b>${s.route}</b> · TTFT ${s.ttft_ms?.toFixed(0) ?? "–"} ms · ${
    s.decode_tokens_per_s?.toFixed(1) ?? "–"
  } tok/s<table><tr><th>node</th><th>layers</th><th>steps</th><th>compute ms</th><th>queue ms</th><th>KiB in</th><th>KiB out</th></tr>${rows}</table>`;
  return d;
}

async function send(text: string): Promise<void> {
  messages.push({ role: "user", content: text });
  add("user", text);
  const out = add("assistant");
  const res = await fetch("/v1/chat/completions", {
    method: "POST",
    headers: headers(),
    body: JSON.stringify({ model, messages, stream: true, max_tokens: 256, temperature: 0 }),
  });
  if (!res.ok || !res.body) {
    out.classList.add("error");
    out.textContent = `${res.status}: ${
      (await res.json().catch(() => ({})))?.error?.message ?? res.statusText
    }`;
    return;
  }
  let reply = "";
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
  }
  out.dataset.done = "1";
  messages.push({ role: "assistant", content: reply });
}

$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  localStorage.setItem("strata-key", keyInput.value);
  const p = $<HTMLTextAreaElement>("prompt");
  const text = p.value.trim();
  if (!text) return;
  p.value = "";
  const button = $<HTMLButtonElement>("send");
  button.disabled = true;
  void send(text).finally(() => (button.disabled = false));
});

fetch("/v1/models", { headers: headers() }).then(async (r) => {
  const j = await r.json();
  model = j.data?.[0]?.id ?? "";
  $("model").textContent = model ? `model ${model}` : `models: ${r.status}`;
});
