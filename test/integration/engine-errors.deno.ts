// Run by engine-errors.test.ts under Deno: feeds the native engine every kind of bad input
// and prints one JSON object of what each produced. The process must survive all of them.
import { EngineError } from "../../src/engine/errors.ts";
import { layerRange } from "../../src/engine/layer-range.ts";
import type { SeqId } from "../../src/engine/range-engine.ts";
import { synthModel } from "../../src/model/synth.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";

const dir = Deno.makeTempDirSync();
const llama = `${dir}/llama.gguf`;
const gemma = `${dir}/gemma.gguf`;
Deno.writeFileSync(llama, synthModel({ arch: "llama", seed: 3 }));
Deno.writeFileSync(gemma, synthModel({ arch: "gemma", seed: 3 }));

const results: Record<string, string> = {};
async function expectError(name: string, fn: () => Promise<unknown>) {
  try {
    await fn();
    results[name] = "no error";
  } catch (e) {
    results[name] = e instanceof EngineError ? `${e.code}: ${e.message}` : `other: ${e}`;
  }
}
const spec = { modelPath: llama, kvCells: 256, maxSequences: 2, batchTokens: 256, threads: 1 };

await expectError(
  "range_reversed",
  () => NativeEngine.load({ ...spec, range: { start: 4, end: 2 } as never }),
);
await expectError("range_past_end", () => NativeEngine.load({ ...spec, range: layerRange(2, 7) }));
await expectError("unsupported_arch", () => NativeEngine.load({ ...spec, modelPath: gemma, range: "whole" }));
await expectError(
  "missing_file",
  () => NativeEngine.load({ ...spec, modelPath: `${dir}/none.gguf`, range: "whole" }),
);

const head = await NativeEngine.load({ ...spec, range: layerRange(0, 3) });
const tail = await NativeEngine.load({ ...spec, range: layerRange(3, 6) });
const s = tail.openSequence();
const E = tail.facts.seamWidth;
await expectError(
  "hidden_wrong_width",
  () => tail.decode({ hidden: new Float32Array(E - 1), seq: Int32Array.of(s), pos: Int32Array.of(0) }),
);
await expectError(
  "hidden_non_finite",
  () => tail.decode({ hidden: new Float32Array(E).fill(NaN), seq: Int32Array.of(s), pos: Int32Array.of(0) }),
);
await expectError(
  "tokens_to_hidden_shard",
  () => tail.decode({ tokens: Int32Array.of(1), seq: Int32Array.of(s), pos: Int32Array.of(0) }),
);
await expectError(
  "unknown_sequence",
  () => tail.decode({ hidden: new Float32Array(E), seq: Int32Array.of(1), pos: Int32Array.of(0) }),
);
await expectError("release_unknown", () => tail.releaseSequence(1 as SeqId));
await expectError(
  "position_gap",
  () => tail.decode({ hidden: new Float32Array(E), seq: Int32Array.of(s), pos: Int32Array.of(5) }),
);
const h = head.openSequence();
await expectError(
  "token_outside_vocab",
  () => head.decode({ tokens: Int32Array.of(1 << 20), seq: Int32Array.of(h), pos: Int32Array.of(0) }),
);

// KV budget: one pool of C cells shared by the sequences (batch-invariant contexts keep each
// one's cells in order inside it); a sequence of C-10 tokens leaves no room for 40 more, the
// refused batch takes nothing, and another sequence still gets the 10 cells left
const C = (await tail.memory()).kvCellsPerSequence;
results["kv_per_sequence"] = String(C);
const iota = (n: number) => Int32Array.from({ length: n }, (_, i) => i);
const big = C - 10;
const hid = await head.decode({
  tokens: iota(big).map((i) => i % 300 + 1),
  seq: new Int32Array(big).fill(h),
  pos: iota(big),
});
await tail.decode({ hidden: hid.data, seq: new Int32Array(big).fill(s), pos: iota(big) });
await expectError(
  "kv_cells_exhausted",
  () =>
    tail.decode({
      hidden: hid.data.subarray(0, 40 * E),
      seq: new Int32Array(40).fill(s),
      pos: iota(40).map((i) => big + i),
    }),
);
const s2 = tail.openSequence();
const other = await tail.decode({
  hidden: hid.data.subarray(0, 10 * E),
  seq: new Int32Array(10).fill(s2),
  pos: iota(10),
  outputs: Uint8Array.from(iota(10), (i) => (i === 9 ? 1 : 0)),
});
results["other_sequence_still_fits"] = String(other.rows);
await expectError("sequences_exhausted", () => Promise.resolve().then(() => tail.openSequence()));

// the engines still work after all of that, and release frees the cells
await tail.releaseSequence(s2);
const ok = await tail.decode({
  hidden: hid.data.subarray(0, E),
  seq: Int32Array.of(s),
  pos: Int32Array.of(big),
  outputs: Uint8Array.of(1),
});
results["still_decodes"] = `${ok.rows}x${ok.dim}`;
await tail.releaseSequence(s);
results["cells_after_release"] = String((await tail.memory()).kvCellsUsed);
console.log(JSON.stringify(results));
