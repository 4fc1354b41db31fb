import { describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { denoRun, root } from "./strata.ts";

// A browser tab as one shard of a route: needs the WASM build and Chromium (`strata test`
// installs both where it may run apt-get); without them this says why and skips.
const wasmDir = join(process.env.STRATA_CACHE ?? join(homedir(), ".cache", "strata"), "wasm");
const built = existsSync(wasmDir) &&
  readdirSync(wasmDir).some((d) => d.startsWith("cpu-") && existsSync(join(wasmDir, d, "strata.wasm")));
const chromium = existsSync(process.env.STRATA_CHROMIUM ?? "/usr/bin/chromium");
if (!built || !chromium) console.warn("volunteer test skipped: needs the WASM build and Chromium");

describe.skipIf(!built || !chromium)("a volunteer tab in a route: native → browser tab → Deno WASM", () => {
  it("serves chats like the whole model, downloads only its range, batches, and leaves cleanly", async () => {
    const shots = join(root, "test-results", "screenshots");
    const r = await denoRun(`${root}test/integration/volunteer.deno.ts`, { SHOTS_DIR: shots });
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // deno-lint-ignore no-explicit-any -- a parsed JSON report
    const ok = (x: any) => x.exact || x.at?.nearTie;

    // the route: native 0:10, the tab 10:20 (WASM CPU; SwiftShader has no shader-f16), Deno WASM 20:30
    expect(out.tab.range).toEqual({ start: 10, end: 20 });
    expect(out.tab.engine).toBe("wasm-cpu");
    expect(out.nodes.map((n: { layers: string; engine: string }) => `${n.layers} ${n.engine}`).sort())
      .toEqual(["0:10 native-cpu", "10:20 wasm-cpu", "20:30 wasm-cpu"]);

    // only the range's bytes, all fetched on the first visit
    const d = out.tab.download;
    expect(d.fetchedBytes).toBe(d.shardBytes);
    expect(d.cachedBytes).toBe(0);
    expect(d.shardBytes).toBeLessThan(out.tab.fileBytes / 2);

    // a chat through the tab: whole-model llama.cpp's greedy text, the tab in its telemetry
    expect(out.plain.status).toBe(200);
    // the tab runs WASM, the reference native: exact, or parting only at a near-tie (reported)
    expect(ok(out.plain), JSON.stringify(out.plain)).toBe(true);
    expect(out.plain.strata.nodes.map((n: { layers: string }) => n.layers)).toEqual([
      "0:10",
      "10:20",
      "20:30",
    ]);

    // json_schema through the tab: the WASM node samples under the grammar, and the answer validates
    expect(out.structured, JSON.stringify(out.structured)).toMatchObject({
      status: 200,
      finish: "stop",
      valid: true,
    });

    // eight at once: all correct (or a reported near-tie), batched together in the tab
    for (const c of out.concurrent.results) {
      expect(c.done && !c.error, JSON.stringify(c)).toBe(true);
      expect(ok(c), JSON.stringify(c)).toBe(true);
    }
    expect(out.concurrent.tabMaxBatchSessions).toBeGreaterThanOrEqual(2);
    const t = out.tabMainThread;
    console.log(
      `volunteer tab's main thread while serving (${out.concurrent.tabBatches} batches): longest task ${t.longestTaskMs} ms (${t.longTasks} of 50 ms or more), a 10 ms timer up to ${t.longestTimerLateMs} ms late`,
    );

    // the chat page streamed the same text and shows the three nodes
    expect(ok(out.chatPage), JSON.stringify(out.chatPage)).toBe(true);
    expect(out.chatPage.rows).toBe(3);

    // a reload downloads nothing: every piece comes from OPFS; the old tab left the tracker
    expect(out.reload.download.fetchedBytes).toBe(0);
    expect(out.reload.download.cachedBytes).toBe(d.shardBytes);
    expect(out.reload.oldNodeDropped).toBe(true);
    expect(ok(out.afterReload)).toBe(true);

    // closing the tab mid-generation: no other node holds 10:20, so the repair finds no route
    // within its deadline and the stream ends with an error that says so; the tracker drops it
    expect(out.closeTab.closedAtChars).toBeGreaterThan(0);
    expect(out.closeTab.stream.error?.code, JSON.stringify(out.closeTab)).toBe("no_route");
    expect(out.closeTab.stream.error?.message).toMatch(/no route could take over within 3000 ms/);
    expect(out.closeTab.trackerDropped).toBe(true);
    // with no node left for 10:20, a request is refused, not hung
    expect(out.afterClose.status).toBe(503);
  });
});
