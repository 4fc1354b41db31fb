// A headless Chromium tab on the gateway's volunteer page, pressing its one button: the
// way `strata up --browser-shard` (and the tests) put a browser shard into a network.
import { type BrowserPage, Chromium } from "./chromium.ts";

/** The page's own state (web/volunteer/main.ts), as globalThis.strataVolunteer shows it. */
export interface VolunteerState {
  phase: string;
  error: string;
  name: string;
  engine: string;
  fallback: string;
  admission: string;
  tokensPerS: number;
  assignment?: { range: { start: number; end: number }; fileBytes: number; downloadBytes: number };
  download?: {
    shardBytes: number;
    fetchedBytes: number;
    cachedBytes: number;
    bySource: Record<string, number>;
    bytesBySource: Record<string, number>;
  };
  info: Record<string, number>;
  /** web/volunteer/main-thread-probe.ts: the page's thread since the tab began to serve */
  mainThread: { longestTaskMs: number; longTasks: number; longestTimerLateMs: number; sinceMs: number };
}

export interface VolunteerTab {
  readonly chromium: Chromium;
  readonly page: BrowserPage;
  state(): Promise<VolunteerState>;
  /** presses the button and waits until the tab serves (admitted) or fails */
  contribute(timeoutMs?: number): Promise<VolunteerState>;
  close(): Promise<void>;
}

export async function openVolunteerTab(
  gatewayUrl: string,
  o: {
    layers?: string;
    threads?: number;
    memoryCapBytes?: number;
    chromium?: Chromium;
    /** an https:// gateway's CA (PEM file), for a browser of its own to trust */
    trustCa?: string;
  } = {},
): Promise<VolunteerTab> {
  const chromium = o.chromium ?? await Chromium.launch([], { trustCa: o.trustCa });
  const q = new URLSearchParams();
  if (o.layers) q.set("layers", o.layers);
  if (o.threads) q.set("threads", String(o.threads));
  if (o.memoryCapBytes) q.set("memoryCap", String(o.memoryCapBytes));
  const page = await chromium.page(`${gatewayUrl}/volunteer/?${q}`);
  const state = () =>
    page.evaluate(() =>
      JSON.parse(
        JSON.stringify(
          (globalThis as unknown as { strataVolunteer: { state: unknown } }).strataVolunteer.state,
        ),
      )
    ) as Promise<VolunteerState>;
  return {
    chromium,
    page,
    state,
    async contribute(timeoutMs = 300_000) {
      await page.waitForSelector("#contribute:not([disabled])", { timeout: 60_000 });
      await page.click("#contribute");
      await page.waitForFunction(
        () => {
          const s =
            (globalThis as unknown as { strataVolunteer: { state: { phase: string } } }).strataVolunteer
              .state;
          return s.phase === "serving" || s.phase === "failed" || s.phase.startsWith("admission: refused");
        },
        undefined,
        { timeout: timeoutMs, polling: 200 },
      );
      const s = await state();
      if (s.phase !== "serving") {
        throw new Error(`the volunteer tab did not start serving: ${s.phase} ${s.error}`);
      }
      return s;
    },
    async close() {
      if (!o.chromium) await chromium.close();
      else await page.close({ runBeforeUnload: true }).catch(() => {});
    },
  };
}
