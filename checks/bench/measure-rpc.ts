// llama.cpp's own split across processes, from the same pin: two rpc-servers (CPU, the
// route's threads each) hold the layers in the route's proportions, and llama-server drives
// them (`--rpc a,b -ngl 99 --tensor-split`), as Strata's driver drives its nodes. The same
// prompt token ids, greedy, streamed from /completion and timed token by token.
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { sseData } from "../../src/gateway/sse.ts";
import { ensureRpcTools } from "../../server/engine/native/rpc-build.ts";
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

export async function measureRpc(
  o: {
    modelPath: string;
    split: readonly LayerRange[];
    threads: number;
    promptTokens: number;
    decodeTokens: number;
  },
): Promise<EngineFigures & { model_mib_per_server: number[] }> {
  const tools = await ensureRpcTools();
  const procs: Deno.ChildProcess[] = [];
  const spawn = (cmd: string, args: string[], stderr: "null" | "piped" = "null") => {
    const p = new Deno.Command(cmd, { args, stdin: "null", stdout: "null", stderr }).spawn();
    procs.push(p);
    return p;
  };
  try {
    const ports = o.split.map(() => freePort());
    for (const port of ports) {
      spawn(tools.rpcServer, ["-H", "127.0.0.1", "-p", String(port), "-t", String(o.threads)]);
    }
    for (const port of ports) {
      await waitFor(`rpc-server :${port}`, async () => {
        const c = await Deno.connect({ hostname: "127.0.0.1", port });
        c.close();
        return true;
      }, 30_000);
    }
    const http = freePort();
    const server = spawn(tools.llamaServer, [
      "-m",
      o.modelPath,
      "--rpc",
      ports.map((p) => `127.0.0.1:${p}`).join(","),
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
    ], "piped");
    const log: string[] = [];
    void (async () => {
      for await (const chunk of server.stderr.pipeThrough(new TextDecoderStream())) log.push(chunk);
    })();
    const base = `http://127.0.0.1:${http}`;
    await waitFor("llama-server", async () => (await fetch(`${base}/health`)).ok, 120_000);

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
    await complete(prompt(16, 99), o.decodeTokens); // warm-up, as long as the measurement
    const { ttft, stepMs } = await complete(prompt(o.promptTokens, 0), o.decodeTokens + 1);
    const rss = (await Promise.all(procs.map((p) => rssOf(p.pid)))).reduce((a, b) => a + b, 0);
    // where llama.cpp put the weights: its "RPC0[host:port] model buffer size = … MiB" lines
    const text = log.join("");
    const perServer = ports.map((p) =>
      Number(
        new RegExp(`RPC\\d+\\[127\\.0\\.0\\.1:${p}\\] model buffer size =\\s+([\\d.]+) MiB`).exec(text)
          ?.[1] ?? 0,
      )
    );
    return { ...figures(o.promptTokens, ttft, stepMs, rss), model_mib_per_server: perServer };
  } finally {
    for (const p of procs) {
      try {
        p.kill("SIGTERM");
      } catch { /* gone */ }
    }
    await Promise.all(procs.map((p) => p.status));
  }
}
