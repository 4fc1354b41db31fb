// The chat page as a person uses it, in headless Chromium on `strata up` with an API key: the
// key prompt, a system prompt, a reply equal to the API's for the same conversation, a
// follow-up that uses the history, the context meter, telemetry folded under each reply, Stop
// mid-answer (the route's session freed), New chat, links between the three pages, and the
// network page's load charts after it; the volunteer page refusing, in words, where it is not a
// secure context.
// Screenshots go to SHOTS_DIR. Prints one JSON object; chat-page.test.ts asserts on it.
import { Chromium } from "../../server/browser/chromium.ts";
import { ServiceProcess } from "../../server/process/service-process.ts";

const KEY = "page-key";
const shots = Deno.env.get("SHOTS_DIR") ?? await Deno.makeTempDir({ prefix: "strata-shots-" });
Deno.mkdirSync(shots, { recursive: true });
const net = await ServiceProcess.start("strata up", ["up", "--port", "0", "--api-key", KEY], {}, 600_000);
const gw = String(net.ready.gateway);
const browser = await Chromium.launch();
const report: Record<string, unknown> = {};

/** The API's own answer to a conversation (greedy, batch-invariant: the page must match it). */
async function apiReply(messages: Array<{ role: string; content: string }>, maxTokens: number) {
  const r = await fetch(`${gw}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "smollm2", messages, temperature: 0, max_tokens: maxTokens }),
  });
  return (await r.json()).choices[0].message.content as string;
}

const freeSessions = async () => (await (await fetch(`${gw}/health`)).json()).free_sessions as number;

try {
  const page = await browser.page(`${gw}/chat/`);
  await page.setViewportSize({ width: 1100, height: 800 });
  await page.waitForFunction(() => document.getElementById("model")?.textContent !== "…");
  report.key_prompt = {
    shown: await page.locator("#keyline").isVisible(),
    model: await page.textContent("#model"),
  };
  await page.fill("#key", KEY);
  await page.dispatchEvent("#key", "change");
  await page.waitForFunction(() => document.getElementById("model")?.textContent?.startsWith("model "));
  report.after_key = {
    shown: await page.locator("#keyline").isVisible(),
    model: await page.textContent("#model"),
  };
  report.links = await page.$$eval("header nav a", (as) => as.map((a) => a.getAttribute("href")));

  const system = "You are a geography teacher. Answer in one sentence.";
  const q1 = "What is the capital of France?";
  const q2 = "And what river flows through it?";
  await page.fill("#system", system);
  await page.fill("#max-tokens", "32");
  const sendAndWait = async (text: string, n: number) => {
    await page.fill("#prompt", text);
    await page.click("#send");
    await page.waitForFunction((k) => document.querySelectorAll(".assistant[data-done]").length >= k, n, {
      timeout: 300_000,
    });
    return (await page.locator(".assistant").nth(n - 1).textContent()) ?? "";
  };
  const a1 = await sendAndWait(q1, 1);
  const a2 = await sendAndWait(q2, 2);
  const history = [
    { role: "system", content: system },
    { role: "user", content: q1 },
    { role: "assistant", content: a1 },
    { role: "user", content: q2 },
  ];
  report.conversation = {
    a1,
    a1_api: await apiReply(history.slice(0, 2), 32),
    a2,
    a2_api: await apiReply(history, 32),
    // the same follow-up without the history: a different answer shows the page sent it
    a2_alone: await apiReply([{ role: "user", content: q2 }], 32),
    system_shown: await page.textContent(".system"),
    meter: await page.textContent("#used-text"),
    folded: await page.$$eval("details.route", (ds) => ds.map((d) => (d as HTMLDetailsElement).open)),
    route_summary: await page.textContent("details.route summary"),
  };
  await page.click("details.route >> nth=0 >> summary");
  await page.screenshot({ path: `${shots}/chat-conversation.png`, fullPage: true });

  // Stop mid-answer: the reply so far stays, marked, and the route's session is freed
  const before = await freeSessions();
  await page.fill("#max-tokens", "600");
  await page.fill("#prompt", "Write a long story about a river that flows through a city.");
  await page.click("#send");
  await page.waitForFunction(
    () => {
      const all = document.querySelectorAll(".assistant");
      return (all[all.length - 1]?.textContent?.length ?? 0) > 40;
    },
    undefined,
    { timeout: 300_000 },
  );
  await page.click("#stop");
  await page.waitForSelector(".assistant.stopped");
  let after = 0;
  for (let i = 0; i < 40 && (after = await freeSessions()) < before; i++) {
    await new Promise((r) => setTimeout(r, 250));
  }
  report.stopped = {
    text_length: ((await page.locator(".assistant.stopped").textContent()) ?? "").length,
    free_before: before,
    free_after: after,
    send_enabled: await page.isEnabled("#send"),
  };
  await page.screenshot({ path: `${shots}/chat-stopped.png`, fullPage: true });

  // New chat: an empty conversation, the meter back at zero
  await page.click("#new-chat");
  report.new_chat = {
    messages: await page.locator(".msg").count(),
    meter: await page.textContent("#used-text"),
  };
  const network = await browser.page(`${gw}/network/`);
  await network.setViewportSize({ width: 1100, height: 900 });
  report.network_links = await network.$$eval("header nav a", (as) => as.map((a) => a.getAttribute("href")));
  // the load charts: what the page drew, and the numbers behind them
  await network.waitForFunction(() =>
    Object.keys((globalThis as unknown as { strataNetwork: { charts: object } }).strataNetwork.charts)
      .length === 4
  );
  report.charts = await network.evaluate(() =>
    (globalThis as unknown as { strataNetwork: { charts: unknown } }).strataNetwork.charts
  );
  const load = await (await fetch(`${gw}/network/api/load`)).json();
  report.load = {
    tokens: load.tokensPerS.reduce((a: number, b: number) => a + b, 0),
    ttft_points: load.ttftP50Ms.filter((x: number | null) => x !== null).length,
    busy_nodes: Object.keys(load.busy).sort(),
    busiest: Math.max(...Object.values(load.busy as Record<string, number[]>).flat()),
  };
  await network.screenshot({ path: `${shots}/network-load.png`, fullPage: true });

  // the volunteer page at a name that is no loopback, over plain HTTP: not a secure context, so
  // it says why it cannot host a shard and asks the network for nothing
  const elsewhere = await Chromium.launch(["--host-resolver-rules=MAP strata.test 127.0.0.1"]);
  try {
    const port = new URL(gw).port;
    const tab = await elsewhere.page(`http://strata.test:${port}/volunteer/`);
    await tab.waitForFunction(() =>
      (globalThis as unknown as { strataVolunteer?: { state: { phase: string } } }).strataVolunteer?.state
        .phase ===
        "cannot run"
    );
    report.insecure_volunteer = {
      phase: await tab.textContent("#phase"),
      reasons: await tab.$$eval("#assignment dd", (dds) => dds.map((d) => d.textContent)),
      button_disabled: await tab.isDisabled("#contribute"),
    };
    await tab.screenshot({ path: `${shots}/volunteer-insecure.png`, fullPage: true });
  } finally {
    await elsewhere.close();
  }
} finally {
  await browser.close();
  await net.stop();
}
console.log(JSON.stringify(report));
Deno.exit(0);
