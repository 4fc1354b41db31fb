// A shard in its own OS process: loads one layer range with the native or the WASM
// engine and serves load / open / decode / release / memory requests over stdin/stdout
// frames. Capture (hidden states inside the range) is the native reference's alone.
import { EngineError } from "../../src/engine/errors.ts";
import type { RangeEngine, SeqId, ShardSpec } from "../../src/engine/range-engine.ts";
import { layerRange } from "../../src/engine/layer-range.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { loadWasmEngine } from "../../server/engine/wasm/load.ts";
import { top2 } from "../../src/parity/compare.ts";
import { encodeFrame, readFrames, splitPayload } from "./frames.ts";
import type { HostBackend } from "./engine-host.ts";

let engine: RangeEngine | undefined;
const out = Deno.stdout.writable.getWriter();

const reply = (header: Record<string, unknown>, parts: ArrayBufferView[] = []) =>
  out.write(encodeFrame(header, parts));

async function load(spec: ShardSpec, backend: HostBackend, capture: boolean): Promise<RangeEngine> {
  if (backend === "wasm" || backend === "webgpu") {
    if (capture) throw new EngineError("bad_input", "capture needs the native engine");
    return await loadWasmEngine(spec, { webgpu: backend === "webgpu" });
  }
  return await NativeEngine.load(spec, backend as NativeBackend, { capture });
}

function need(): RangeEngine {
  if (!engine) throw new EngineError("engine_failed", "no shard loaded");
  return engine;
}

const rss = () => Deno.memoryUsage().rss;

for await (const { header: h, payload } of readFrames(Deno.stdin.readable)) {
  try {
    switch (h.op) {
      case "load": {
        const s = h.spec as Record<string, number | string>;
        engine = await load(
          {
            modelPath: String(s.modelPath),
            range: s.start === undefined ? "whole" : layerRange(Number(s.start), Number(s.end)),
            kvCells: Number(s.kvCells),
            maxSequences: Number(s.maxSequences),
            batchTokens: Number(s.batchTokens),
            threads: Number(s.threads),
          },
          h.backend as HostBackend,
          Boolean(h.capture),
        );
        await reply({
          facts: engine.facts,
          engineBackend: engine.backend,
          memory: await engine.memory(),
          rss: rss(),
        });
        break;
      }
      case "open":
        await reply({ seq: need().openSequence() });
        break;
      case "decode": {
        const e = need();
        const n = Number(h.n);
        const width = e.input === "tokens" ? 1 : e.facts.seamWidth;
        const [input, pos, seq, outputs] = splitPayload(payload, [
          [e.input === "tokens" ? "i32" : "f32", n * width],
          ["i32", n],
          ["i32", n],
          ["u8", n],
        ]);
        const capture = (h.capture as number[] | undefined) ?? [];
        if (capture.length && !(e instanceof NativeEngine)) {
          throw new EngineError("bad_input", "capture needs the native engine");
        }
        if (capture.length) await (e as NativeEngine).capture(capture);
        const t0 = performance.now();
        const r = await e.decode({
          tokens: e.input === "tokens" ? input as Int32Array : undefined,
          hidden: e.input === "hidden" ? input as Float32Array : undefined,
          pos: pos as Int32Array,
          seq: seq as Int32Array,
          outputs: outputs as Uint8Array,
        });
        if (h.greedy) {
          // a benchmark's step as one process runs it: the engine, then a token for each output row,
          // timed here so that the pipe to the parent is not counted against the whole model
          const tokens = Array.from(
            { length: r.rows },
            (_, i) => top2(r.data.subarray(i * r.dim, (i + 1) * r.dim)).best,
          );
          await reply({ tokens, ms: performance.now() - t0 });
          break;
        }
        const captured = await Promise.all(capture.map((il) => (e as NativeEngine).captured(il)));
        await reply({ rows: r.rows, dim: r.dim, captured: captured.map((c) => c.length) }, [
          r.data,
          ...captured,
        ]);
        break;
      }
      case "release":
        await need().releaseSequence(Number(h.seq) as SeqId);
        await reply({ memory: await need().memory() });
        break;
      case "memory":
        await reply({ memory: await engine?.memory(), rss: rss() });
        break;
      case "quit":
        await engine?.close();
        await reply({ bye: true });
        Deno.exit(0);
        break;
      default:
        throw new EngineError("bad_input", `unknown op ${String(h.op)}`);
    }
  } catch (err) {
    const code = err instanceof EngineError ? err.code : "engine_failed";
    await reply({ error: { code, message: err instanceof Error ? err.message : String(err) } });
  }
}
