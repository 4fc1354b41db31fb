// Shards in headless Chromium tabs: one tab per layer range, each with its own WASM
// engine, driven through page.evaluate with the same EngineHost interface as a shard process.
import { EngineError, type EngineErrorCode } from "../../src/engine/errors.ts";
import type { EngineMemory, ModelFacts, SeqId } from "../../src/engine/range-engine.ts";
import { f32FromBase64, toBase64 } from "../../src/bytes/base64.ts";
import type { EngineTabApi, HostLoad } from "./engine-tab/main.ts";
import { log } from "../../server/log/log.ts";
import { type BrowserPage, Chromium } from "../../server/browser/chromium.ts";
import { type HostOrigin, serveHostOrigin } from "./host-origin.ts";
import {
  type EngineHost,
  type EngineHostLoad,
  type EngineHostStep,
  hostLabel,
} from "../engine-host/engine-host.ts";

type Result<T> = { ok: T } | { error: { code: EngineErrorCode; message: string } };

export class ChromiumHosts {
  private constructor(private readonly browser: Chromium, private readonly origin: HostOrigin) {}

  static async launch(modelPath: string): Promise<ChromiumHosts> {
    const origin = await serveHostOrigin(modelPath);
    try {
      return new ChromiumHosts(await Chromium.launch(), origin);
    } catch (err) {
      await origin.close();
      throw err;
    }
  }

  async load(spec: EngineHostLoad): Promise<TabEngineHost> {
    if (spec.backend !== "wasm" && spec.backend !== "webgpu") {
      throw new Error(`a browser tab runs the WASM engine, not ${spec.backend}`);
    }
    const page = await this.browser.page(this.origin.url);
    await page.waitForFunction(() => "strataEngineTab" in globalThis);
    const shard = new TabEngineHost(page, hostLabel(spec.range));
    const load: HostLoad = {
      ...(spec.range === "whole" ? {} : { start: spec.range.start, end: spec.range.end }),
      kvCells: spec.kvCells,
      maxSequences: spec.maxSequences,
      batchTokens: spec.batchTokens,
      threads: spec.threads,
      backend: spec.backend,
    };
    const r = await shard.call("load", load) as {
      facts: ModelFacts;
      engineBackend: string;
      crossOriginIsolated: boolean;
    };
    for (const line of await shard.call("logs") as string[]) {
      log.warn("engine.fallback", { tab: shard.label, line });
    }
    shard.facts = r.facts;
    shard.engineBackend = r.engineBackend;
    shard.crossOriginIsolated = r.crossOriginIsolated;
    return shard;
  }

  async close(): Promise<void> {
    await this.browser.close();
    await this.origin.close();
  }
}

export class TabEngineHost implements EngineHost {
  facts!: ModelFacts;
  engineBackend = "";
  crossOriginIsolated = false;

  constructor(private readonly page: BrowserPage, readonly label: string) {}

  /** One call into the tab's host API; its errors come back as values with their codes. */
  async call(name: keyof EngineTabApi, arg?: unknown): Promise<unknown> {
    const r = await this.page.evaluate(
      // deno-lint-ignore no-explicit-any -- the tab's global, typed by EngineTabApi
      ([n, a]) => (globalThis as any).strataEngineTab[n as string](a),
      [name, arg] as const,
    ) as Result<unknown>;
    if ("error" in r) throw new EngineError(r.error.code, `${this.label} (browser): ${r.error.message}`);
    return r.ok;
  }

  async open(): Promise<SeqId> {
    return await this.call("open") as SeqId;
  }

  async decode(
    input: Int32Array | Float32Array,
    pos: Int32Array,
    seq: Int32Array,
    outputs: Uint8Array,
    capture: number[] = [],
  ): Promise<EngineHostStep> {
    if (capture.length) throw new EngineError("bad_input", "capture needs the native engine");
    const r = await this.call("decode", {
      input: toBase64(input),
      pos: toBase64(pos),
      seq: toBase64(seq),
      outputs: toBase64(outputs),
    }) as { rows: number; dim: number; data: string };
    return { rows: r.rows, dim: r.dim, data: f32FromBase64(r.data), captured: [] };
  }

  async release(seq: SeqId): Promise<EngineMemory> {
    return await this.call("release", seq) as EngineMemory;
  }

  async memory(): Promise<{ memory: EngineMemory; rss: number }> {
    // a tab's memory is the browser's to report; the engine's own accounting is exact
    const memory = await this.call("memory") as EngineMemory;
    return { memory, rss: 0 };
  }

  async close(): Promise<void> {
    await this.call("close").catch(() => {});
    await this.page.close().catch(() => {});
  }
}
