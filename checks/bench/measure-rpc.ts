// llama.cpp's own split across processes, from the same pin: two rpc-servers (CPU, the
// route's threads each) hold the layers in the route's proportions, and llama-server drives
// them (`--rpc a,b -ngl 99 --tensor-split`), as Strata's driver drives its nodes. The same
// prompt token ids, greedy, streamed from /completion and timed token by token.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { sseData } from "../../src/gateway/sse.ts";
import { ensureRpcTools, type RpcTools } from "../../server/build/rpc.ts";
import { type EngineFigures, figures, rssOf } from "./figures.ts";
import { prompt } from "./route-throughput.ts";
import { freePort } from "../../server/http/free-port.ts";

async function waitFor(what: string, ok: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await ok().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} not ready within ${timeoutMs / 1000} s`);
}

export interface RpcOptions {
  readonly modelPath: string;
  readonly split: readonly LayerRange[];
  readonly threads: number;
  readonly promptTokens: number;
  readonly decodeTokens: number;
}

/** llama-server driving rpc-servers that already listen at `servers` (host:port, in split order). */
export interface RpcDriver {
  /** one session as every system is measured: the prompt and the decode, after a warm-up as long
   *  (unless `warm` is false: the driver has run before) */
  measure(warm?: boolean): Promise<{ ttft: number; stepMs: number[] }>;
  readonly pid: number;
  /** where llama.cpp put the weights: MiB on each server */
  perServerMiB(): number[];
  close(): Promise<void>;
}

export async function startRpcDriver(
  tools: RpcTools,
  servers: readonly string[],
  o: RpcOptions,
): Promise<RpcDriver> {
  const http = freePort();
  const server = new Deno.Command(tools.llamaServer, {
    args: [
      "-m",
      o.modelPath,
      "--rpc",
      servers.join(","),
      "-ngl",
      "99",
      "--tensor-split",
      o.split.map((r) => String(r.end - r.start)).join(","),
      "-t",
      String(o.threads),
      "-c",
      "2048",
      "-np",
      "1",
      "--host",
      "127.0.0.1",
      "--port",
      String(http),
      // verbosity 4 logs where the weights went
      "-lv",
      "4",
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const log: string[] = [];
  void (async () => {
    for await (const chunk of server.stderr.pipeThrough(new TextDecoderStream())) log.push(chunk);
  })();
  const close = async () => {
    try {
      server.kill("SIGTERM");
    } catch { /* gone */ }
    await server.status;
  };
  const base = `http://127.0.0.1:${http}`;
  try {
    await waitFor("llama-server", async () => (await fetch(`${base}/health`)).ok, 300_000);
  } catch (e) {
    await close();
    throw e;
  }
  const complete = async (ids: Int32Array, n: number) => {
    const t0 = performance.now();
    const r = await fetch(`${base}/completion`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        prompt: [...ids],
        n_predict: n,
        stream: true,
        temperature: 0,
        top_k: 1,
        cache_prompt: false,
        ignore_eos: true,
      }),
    });
    const at: number[] = [];
    for await (const data of sseData(r.body!)) {
      const j = JSON.parse(data);
      if (j.content !== undefined && !j.stop) at.push(performance.now());
      if (j.stop) break;
    }
    return { ttft: at[0] - t0, stepMs: at.slice(1).map((t, i) => t - at[i]) };
  };
  return {
    async measure(warm = true) {
      if (warm) await complete(prompt(16, 99), o.decodeTokens); // as long as the measurement
      return await complete(prompt(o.promptTokens, 0), o.decodeTokens + 1);
    },
    pid: server.pid,
    perServerMiB: () => {
      // "RPC0[host:port] model buffer size = … MiB"
      const text = log.join("");
      return servers.map((hp) =>
        Number(
          new RegExp(`RPC\\d+\\[${hp.replaceAll(".", "\\.")}\\] model buffer size =\\s+([\\d.]+) MiB`)
            .exec(text)?.[1] ?? 0,
        )
      );
    },
    close,
  };
}

/** rpc-server for one range: listening on host:port with the route's threads. */
export function rpcServerArgs(tools: RpcTools, host: string, port: number, threads: number): string[] {
  return [tools.rpcServer, "-H", host, "-p", String(port), "-t", String(threads)];
}

/** Waits until something accepts TCP connections at host:port. */
export function waitListening(hostname: string, port: number, timeoutMs = 30_000): Promise<void> {
  return waitFor(`rpc-server ${hostname}:${port}`, async () => {
    const c = await Deno.connect({ hostname, port });
    c.close();
    return true;
  }, timeoutMs);
}

export async function measureRpc(o: RpcOptions): Promise<EngineFigures & { model_mib_per_server: number[] }> {
  const tools = await ensureRpcTools();
  const procs: Deno.ChildProcess[] = [];
  try {
    const ports = o.split.map(() => freePort());
    for (const port of ports) {
      const [cmd, ...args] = rpcServerArgs(tools, "127.0.0.1", port, o.threads);
      procs.push(new Deno.Command(cmd, { args, stdin: "null", stdout: "null", stderr: "null" }).spawn());
    }
    for (const port of ports) await waitListening("127.0.0.1", port);
    const driver = await startRpcDriver(tools, ports.map((p) => `127.0.0.1:${p}`), o);
    try {
      const { ttft, stepMs } = await driver.measure();
      const rss = (await Promise.all([...procs.map((p) => p.pid), driver.pid].map(rssOf))).reduce(
        (a, b) => a + b,
        0,
      );
      return { ...figures(o.promptTokens, ttft, stepMs, rss), model_mib_per_server: driver.perServerMiB() };
    } finally {
      await driver.close();
    }
  } finally {
    for (const p of procs) {
      try {
        p.kill("SIGTERM");
      } catch { /* gone */ }
    }
    await Promise.all(procs.map((p) => p.status));
  }
}
