// `strata model certify`: the probe reference for a model, computed range by range so that
// no more than the memory cap is ever loaded. Each range's engine takes the states the range
// before it produced (exactly what a node would be sent), records the residual stream leaving
// each of its layers, and is closed before the next range loads.
import { layerRange } from "../../src/engine/layer-range.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { headerGraphShape } from "../../src/gguf/graph-shape.ts";
import { buildManifest } from "../../src/gguf/manifest.ts";
import { certifyRanges, probePrompts } from "../../src/model/certify-plan.ts";
import { probeSet, type ReferenceProbe, signProbeSet } from "../../src/tracker/admission/reference.ts";
import { shardMemory } from "../../src/engine/memory-cap.ts";
import { hexToBytes } from "../../src/bytes/hex.ts";
import type { NativeBackend } from "../../src/engine/backends.ts";
import { NativeEngine } from "../engine/native/native-engine.ts";
import { log } from "../log/log.ts";
import { progress } from "../log/progress.ts";
import { readHeader } from "../model/facts.ts";
import { sha256File } from "../model/hash.ts";
import type { PublisherKey } from "../model/publisher-key.ts";

export interface CertifyOptions {
  readonly modelPath: string;
  readonly capBytes: number;
  readonly backend: NativeBackend;
  readonly key: PublisherKey;
  /** probe prompts and tokens in each */
  readonly probes?: number;
  readonly tokens?: number;
  readonly threads?: number;
}

export interface Certified {
  /** the reference file's bytes */
  readonly file: Uint8Array;
  readonly artifact: string;
  readonly ranges: ReadonlyArray<{ start: number; end: number }>;
}

export async function certify(o: CertifyOptions): Promise<Certified> {
  const [header, artifact, st] = await Promise.all([
    readHeader(o.modelPath),
    sha256File(o.modelPath),
    Deno.stat(o.modelPath),
  ]);
  const manifest = buildManifest(header, st.size, artifact);
  const shape = kvShape(header);
  const nTokens = o.tokens ?? 8;
  const nProbes = o.probes ?? 4;
  // the probe's KV needs are tiny: the cap goes to weights, then compute buffers
  const kvCells = Math.max(nTokens, 32);
  const ranges = certifyRanges(
    manifest.nLayer,
    (r) =>
      shardMemory({ manifest, kv: shape.layers, graph: headerGraphShape(header) }, r, kvCells, {
        maxSequences: 1,
        batchTokens: nTokens,
        batchInvariant: true,
        flashAttention: o.backend === "cpu",
      }).total,
    o.capBytes,
  );
  log.info("certify.plan", { ranges: ranges.map((r) => `${r.start}:${r.end}`), cap: o.capBytes });
  let nVocab = 0;
  let seamWidth = 0;
  // what enters the next range: token ids first, then each probe's hidden states
  let inputs: Array<Int32Array | Float32Array> = [];
  const after: Float32Array[][] = [];
  let logits: Float32Array[] = [];
  const bar = progress(`certify: ${manifest.nLayer} layers in ${ranges.length} ranges`, manifest.nLayer);
  for (const r of ranges) {
    const engine = await NativeEngine.load(
      {
        modelPath: o.modelPath,
        range: layerRange(r.start, r.end, manifest.nLayer),
        kvCells,
        maxSequences: 1,
        batchTokens: nTokens,
        threads: o.threads ?? navigator.hardwareConcurrency,
      },
      o.backend,
      { capture: true },
    );
    try {
      nVocab = engine.facts.nVocab;
      seamWidth = engine.facts.seamWidth;
      if (r.start === 0) inputs = probePrompts(nVocab, nProbes, nTokens, seedOf(artifact));
      const layers = Array.from({ length: r.end - r.start }, (_, i) => r.start + i);
      await engine.capture(layers);
      const last = r.end === manifest.nLayer;
      const next: Float32Array[] = [];
      for (const [p, input] of inputs.entries()) {
        const seq = engine.openSequence();
        const outputs = new Uint8Array(nTokens).fill(last ? 0 : 1);
        if (last) outputs[nTokens - 1] = 1;
        const out = await engine.decode({
          ...(input instanceof Int32Array ? { tokens: input } : { hidden: input }),
          seq: new Int32Array(nTokens).fill(seq),
          pos: Int32Array.from({ length: nTokens }, (_, i) => i),
          outputs,
        });
        for (const il of layers) {
          // a range's own output is what leaves its last layer (not captured apart)
          let state = !last && il === r.end - 1 ? out.data.slice() : await engine.captured(il);
          // the model's last layer computes only the rows it outputs: the last token's (deepseek4
          // trims after its last layer, so its capture holds every row: the last is kept)
          const rows = il === manifest.nLayer - 1 ? 1 : nTokens;
          const w = engine.facts.seamWidth;
          if (rows === 1 && state.length === nTokens * w) state = state.slice((nTokens - 1) * w);
          if (state.length !== rows * w) {
            throw new Error(
              `layer ${il}: ${state.length} values captured, not ${rows} × ${w}`,
            );
          }
          (after[p] ??= [])[il] = state;
        }
        if (last) logits[p] = out.data.slice(0, nVocab);
        else next.push(out.data.slice());
        await engine.releaseSequence(seq);
      }
      inputs = next;
    } finally {
      await engine.close();
    }
    bar.update(r.end, manifest.nLayer);
  }
  bar.finish(`${ranges.length} ranges`);
  const probes: ReferenceProbe[] = after.map((a, p) => ({
    tokens: probePrompts(nVocab, nProbes, nTokens, seedOf(artifact))[p],
    after: a,
    logits: logits[p],
  }));
  logits = [];
  const set = probeSet({
    artifactSha256: hexToBytes(artifact),
    nLayer: manifest.nLayer,
    nEmbd: seamWidth,
    nVocab,
    engine: `native-${o.backend}`,
    probes,
    memoryCapBytes: o.capBytes,
    ranges,
  });
  return { file: await signProbeSet(set, o.key), artifact, ranges };
}

/** The probe prompts follow from the artifact: the same model always gets the same probes. */
const seedOf = (artifact: string) => parseInt(artifact.slice(0, 8), 16);
