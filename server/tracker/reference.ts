// The tracker's reference for admission probes: the whole model, run once on the probe
// tokens by the tracker's own native engine, recording the residual stream after every
// layer and the last token's logits. Any range's expected input and output come from it.
import { probeTokens } from "../../src/tracker/probe.ts";
import type { NativeBackend } from "../engine/native/build.ts";
import { NativeEngine } from "../engine/native/native-engine.ts";

export interface ProbeReference {
  readonly tokens: Int32Array;
  readonly nLayer: number;
  readonly nEmbd: number;
  readonly nVocab: number;
  /** residual stream after layer il (tokens × n_embd) */
  readonly after: Float32Array[];
  /** logits of the last probe token */
  readonly logits: Float32Array;
  readonly engine: string;
}

export async function probeReference(modelPath: string, backend: NativeBackend): Promise<ProbeReference> {
  const probe = probeTokens(1 << 30);
  const engine = await NativeEngine.load(
    {
      modelPath,
      range: "whole",
      kvCells: 64,
      maxSequences: 1,
      batchTokens: 64,
      threads: navigator.hardwareConcurrency,
    },
    backend,
    { capture: true },
  );
  try {
    const f = engine.facts;
    const tokens = probeTokens(f.nVocab, probe.length);
    const layers = Array.from({ length: f.nLayer }, (_, i) => i);
    await engine.capture(layers);
    const seq = engine.openSequence();
    const n = tokens.length;
    const outputs = new Uint8Array(n);
    outputs[n - 1] = 1;
    const out = await engine.decode({
      tokens,
      seq: new Int32Array(n).fill(seq),
      pos: Int32Array.from({ length: n }, (_, i) => i),
      outputs,
    });
    return {
      tokens,
      nLayer: f.nLayer,
      nEmbd: f.nEmbd,
      nVocab: f.nVocab,
      after: await Promise.all(layers.map((il) => engine.captured(il))),
      logits: out.data.slice(0, f.nVocab),
      engine: `native-${backend}`,
    };
  } finally {
    await engine.close();
  }
}
