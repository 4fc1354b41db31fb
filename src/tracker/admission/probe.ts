// Capability admission: a node runs a fixed probe through its range and its output must
// match the tracker's reference for that range within a stated tolerance.

import { CROSS_ENGINE_HIDDEN_REL_TOL, HIDDEN_REL_TOL } from "../../parity/tolerance.ts";

export interface ProbeVerdict {
  readonly ok: boolean;
  readonly maxAbsDiff: number;
  /** the tolerance the difference was held to (absolute) */
  readonly allowed: number;
  readonly detail: string;
}

/**
 * The same engine kind as the reference reproduces it to rounding; another backend (WASM
 * or GPU kernels, other accumulation orders) is held to the cross-engine tolerance.
 */
export const PROBE_TOLERANCE = {
  sameEngine: HIDDEN_REL_TOL,
  otherEngine: CROSS_ENGINE_HIDDEN_REL_TOL,
} as const;

export function judgeProbe(reference: Float32Array, got: Float32Array, relTol: number): ProbeVerdict {
  if (reference.length !== got.length) {
    return {
      ok: false,
      maxAbsDiff: Infinity,
      allowed: 0,
      detail: `${got.length} values for ${reference.length}`,
    };
  }
  let scale = 1;
  let diff = 0;
  for (let i = 0; i < reference.length; i++) {
    scale = Math.max(scale, Math.abs(reference[i]));
    const d = Math.abs(reference[i] - got[i]);
    if (Number.isNaN(d)) {
      return { ok: false, maxAbsDiff: NaN, allowed: 0, detail: `not a number at ${i}` };
    }
    if (d > diff) diff = d;
  }
  const allowed = relTol * scale;
  const ok = diff <= allowed;
  return {
    ok,
    maxAbsDiff: diff,
    allowed,
    detail: `max |Δ| ${diff.toExponential(2)} ${ok ? "≤" : ">"} ${
      allowed.toExponential(2)
    } (${relTol} × scale ${scale.toFixed(2)})`,
  };
}

/** Probe token ids: fixed, spread over the ordinary part of the vocabulary. */
export function probeTokens(nVocab: number, n = 8): Int32Array {
  return Int32Array.from({ length: n }, (_, i) => (1000 + i * 7919) % Math.max(1, nVocab - 1));
}
