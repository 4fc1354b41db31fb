// What q8 row transport costs in accuracy: real chat prompts through a split of native range
// engines twice at once, hidden states crossing each seam as f32 (bit-identical to the whole
// model) and as q8 rows. Per seam: the error one quantization adds, and how far the q8 chain
// has drifted from f32 there; at the end: logits and greedy tokens against f32.
import { formatRange, type LayerRange } from "../../src/engine/layer-range.ts";
import type { RangeEngine, SeqId } from "../../src/engine/range-engine.ts";
import type { Tokenizer } from "../../src/engine/tokenizer.ts";
import { maxAbs, maxAbsDiff, sigma, top2 } from "../../src/parity/compare.ts";
import {
  dequantizeBlocks,
  dequantizeRows,
  Q8_BLOCK,
  quantizeBlocks,
  quantizeRows,
} from "../../src/seam/q8.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { parityPrompts } from "../parity/prompts.ts";

export type Q8Kind = "row" | "block32";
const roundTrip = (kind: Q8Kind, h: Float32Array, rows: number, cols: number) =>
  kind === "row"
    ? dequantizeRows(quantizeRows(h, rows, cols), rows, cols)
    : dequantizeBlocks(quantizeBlocks(h, rows, cols), rows, cols);

export async function benchSeamCompression(
  o: {
    modelPath: string;
    tokenizer: Tokenizer;
    split: readonly LayerRange[];
    prompts: number;
    steps: number;
    kind: Q8Kind;
  },
) {
  const engines: RangeEngine[] = [];
  for (const range of o.split) {
    engines.push(
      await NativeEngine.load(
        { modelPath: o.modelPath, range, kvCells: 4096, maxSequences: 2, batchTokens: 512, threads: 1 },
        "cpu",
      ),
    );
  }
  const seams = o.split.slice(0, -1).map((r) => ({
    afterLayer: r.end - 1,
    stepErr: 0,
    stepRms: 0,
    driftErr: 0,
  }));
  /** ‖a − b‖ / ‖b‖: what max-relative hides when one outlier channel sets the scale */
  const rmsRel = (a: Float32Array, b: Float32Array) => {
    let d = 0, n = 0;
    for (let i = 0; i < b.length; i++) {
      d += (a[i] - b[i]) ** 2;
      n += b[i] ** 2;
    }
    return Math.sqrt(d / n);
  };
  let logitsSigma = 0;
  const sessions = [];
  try {
    for (const prompt of parityPrompts(o.tokenizer, o.prompts)) {
      const seqF = engines.map((e) => e.openSequence());
      const seqQ = engines.map((e) => e.openSequence());
      const run = async (seqs: SeqId[], tokens: Int32Array, at: number, quantize: boolean) => {
        const n = tokens.length;
        let x: Int32Array | Float32Array = tokens;
        const hidden: Float32Array[] = [];
        for (const [i, e] of engines.entries()) {
          const r = await e.decode({
            ...(x instanceof Int32Array ? { tokens: x } : { hidden: x }),
            seq: new Int32Array(n).fill(seqs[i]),
            pos: Int32Array.from({ length: n }, (_, k) => at + k),
            outputs: Uint8Array.from({ length: n }, (_, k) => (k === n - 1 ? 1 : 0)),
          });
          if (i === engines.length - 1) return { logits: r.data, hidden };
          hidden.push(r.data);
          x = quantize ? roundTrip(o.kind, r.data, r.rows, r.dim) : r.data;
          if (quantize) {
            seams[i].stepErr = Math.max(seams[i].stepErr, maxAbsDiff(x, r.data) / maxAbs(r.data));
            seams[i].stepRms = Math.max(seams[i].stepRms, rmsRel(x, r.data));
          }
        }
        throw new Error("unreachable");
      };
      let inF = prompt, inQ = prompt, at = 0;
      const f: number[] = [], q: number[] = [];
      let divergence: { step: number; gapSigma: number } | undefined;
      for (let s = 0; s < o.steps; s++) {
        const a = await run(seqF, inF, at, false);
        const b = await run(seqQ, inQ, at, true);
        const ta = top2(a.logits), tb = top2(b.logits);
        if (!divergence) {
          // while both chains saw the same tokens, their states are comparable
          a.hidden.forEach((h, i) =>
            seams[i].driftErr = Math.max(seams[i].driftErr, maxAbsDiff(h, b.hidden[i]) / maxAbs(h))
          );
          logitsSigma = Math.max(logitsSigma, maxAbsDiff(a.logits, b.logits) / sigma(a.logits));
          if (ta.best !== tb.best) divergence = { step: s, gapSigma: ta.gap / sigma(a.logits) };
        }
        f.push(ta.best);
        q.push(tb.best);
        at += inF.length;
        inF = Int32Array.of(ta.best);
        inQ = Int32Array.of(divergence ? tb.best : ta.best);
        if (divergence) break;
      }
      sessions.push({ identical_steps: divergence?.step ?? o.steps, divergence });
      for (const [i, e] of engines.entries()) {
        await e.releaseSequence(seqF[i]);
        await e.releaseSequence(seqQ[i]);
      }
    }
  } finally {
    for (const e of engines) await e.close();
  }
  const nEmbd = engines[0].facts.seamWidth;
  const blocks = o.kind === "row" ? 1 : Math.ceil(nEmbd / Q8_BLOCK);
  return {
    kind: o.kind,
    split: o.split.map(formatRange).join(","),
    steps: o.steps,
    seams: seams.map((s) => ({
      after_layer: s.afterLayer,
      q8_step_rel_err_max: s.stepErr,
      q8_step_rms_rel_err_max: s.stepRms,
      q8_vs_f32_rel_err_max: s.driftErr,
    })),
    logits_max_diff_sigma: logitsSigma,
    sessions,
    bytes_per_row: { f32: 4 * nEmbd, q8: nEmbd + 4 * blocks, ratio: (4 * nEmbd) / (nEmbd + 4 * blocks) },
  };
}
