import { describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { denoRun, root } from "./strata.ts";

const chromium = existsSync(process.env.STRATA_CHROMIUM ?? "/usr/bin/chromium");
if (!chromium) console.warn("chat page test skipped: needs Chromium");

// The chat page in headless Chromium on `strata up` with a key (see chat-page.deno.ts).
describe.skipIf(!chromium)("the chat page as a person uses it", () => {
  it("asks for the key, keeps the system prompt and history, meters the context, stops, starts over, links the pages", async () => {
    const shots = join(root, "test-results", "screenshots");
    const r = await denoRun(`${root}test/integration/chat-page.deno.ts`, { SHOTS_DIR: shots });
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(out.key_prompt).toEqual({ shown: true, model: "API key needed" });
    expect(out.after_key).toEqual({ shown: false, model: "model smollm2" });
    const pages = ["/chat/", "/volunteer/", "/network/"];
    expect(out.links).toEqual(pages);
    expect(out.network_links).toEqual(pages);

    const c = out.conversation;
    // the page sends the system prompt and the history: its replies are the API's for them
    expect(c.a1.length).toBeGreaterThan(0);
    expect(c.a1).toBe(c.a1_api);
    expect(c.a2).toBe(c.a2_api);
    expect(c.a2).not.toBe(c.a2_alone);
    expect(c.system_shown).toMatch(/geography teacher/);
    expect(c.meter).toMatch(/^\d+ of 8,192 tokens$/);
    expect(Number(c.meter.split(" ")[0])).toBeGreaterThan(20);
    expect(c.folded).toEqual([false, false]);
    expect(c.route_summary).toMatch(/^route r0n0\+r0n1 · TTFT \d+ ms · [\d.]+ tok\/s$/);

    // Stop keeps what came, frees the route's session, and the page can send again
    expect(out.stopped.text_length).toBeGreaterThan(40);
    expect(out.stopped.free_after).toBe(out.stopped.free_before);
    expect(out.stopped.send_enabled).toBe(true);
    expect(out.new_chat).toEqual({ messages: 0, meter: "0 of 8,192 tokens" });

    // the network page charts the load: ten minutes a second at a time, every node of the route
    expect(out.charts["chart-tokens"]).toEqual({ series: ["tokens/s"], points: 600 });
    expect(out.charts["chart-ttft"].series).toEqual(["p50", "p95"]);
    expect(out.charts["chart-queue"].series).toEqual(["queue depth"]);
    expect(out.charts["chart-busy"].series).toEqual(["r0n0", "r0n1"]);
    expect(out.load.tokens).toBeGreaterThan(60);
    expect(out.load.ttft_points).toBeGreaterThan(0);
    expect(out.load.busy_nodes).toEqual(["r0n0", "r0n1"]);
    expect(out.load.busiest).toBeGreaterThan(0);

    // the volunteer page where it cannot run: the reason in words, nothing to press
    expect(out.insecure_volunteer.phase).toBe("cannot run");
    expect(out.insecure_volunteer.reasons[0]).toMatch(/^This page is not a secure context/);
    expect(out.insecure_volunteer.button_disabled).toBe(true);
  });
});
