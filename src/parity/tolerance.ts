// The numbers that decide "equal" in parity runs. One place; never loosened to pass a run.

/**
 * Hidden states at a seam, range vs whole, relative to the seam's largest |h|.
 * The range and the whole model run the same kernels on the same shapes, so on one
 * backend they agree bit for bit (measured: 0 on CPU); the slack only absorbs a backend
 * that reorders a reduction between graph layouts.
 */
export const HIDDEN_REL_TOL = 1e-4;

/**
 * Hidden states at a seam when the range runs on WASM CPU and the reference on native x86
 * CPU, relative to the seam's largest |h|. Both quantize activations to 8 bits (rounding to
 * nearest, since patch 0004) and multiply in integers; what differs is float accumulation
 * order in SIMD lanes of 4 vs 8 and libm's exp/sin/cos. Measured on SmolLM2 Q4_1: 1e-3 to
 * 1.4e-3 after layers 0–11 (docs/engine.md); 5e-3 keeps that with room, while the
 * truncating quantizer it replaced (2–4 %) or a skipped layer (≥ 30 %) fails.
 */
export const WASM_CPU_HIDDEN_REL_TOL = 5e-3;

/**
 * Hidden states at a seam on any other engine than the reference (GPU kernels: f16
 * storage and accumulation, dequantized weights instead of integer dot products), relative
 * to the seam's largest |h|. 5 % admits f16 rounding compounded over 30 layers while a
 * skipped or repeated layer (≥ 30 % on SmolLM2) still fails.
 */
export const CROSS_ENGINE_HIDDEN_REL_TOL = 5e-2;

/** The tolerance a seam is held to when the shards before it ran on these engines. */
export function hiddenTolerance(referenceEngine: string, engines: readonly string[]): number {
  return Math.max(
    ...engines.map((e) =>
      e === referenceEngine
        ? HIDDEN_REL_TOL
        : e === "wasm-cpu"
        ? WASM_CPU_HIDDEN_REL_TOL
        : CROSS_ENGINE_HIDDEN_REL_TOL
    ),
  );
}

/**
 * Batched vs alone. llama.cpp's decode is not batch-invariant: a session decoded in mixed
 * batches (other sessions' prefill chunks and decode steps beside it, its KV cells spread
 * between theirs) sums in another order than alone — different kernels per batch size, and
 * flash attention accumulating in f16 over another KV layout. Differences are measured in
 * units of σ, the standard deviation of the reference step's logits (≈2.6 on SmolLM2, ≈6 on
 * the synthetic models), because logit scales differ between models. Largest drift measured
 * over the suite's 32-step staggered runs: 0.24 σ on SmolLM2 Q4_1 (CPU), 0.009 σ on the
 * synthetic F32 models (CPU), 0.036 σ on the synthetic llama (Vulkan, lavapipe). Switching
 * flash attention off for one session alone moves SmolLM2's logits by as much (0.35–0.8).
 *
 * A divergence counts as a near-tie only when the reference's top-2 gap there is under
 * tieGapSigma and every earlier step's logits agree within logitTolSigma: twice the largest
 * drift measured. A real fault (a wrong KV cell, a skipped layer, cross-talk) moves logits
 * by several σ at once.
 */
export interface BatchTolerance {
  readonly tieGapSigma: number;
  readonly logitTolSigma: number;
}

export const BATCH_TOLERANCE: BatchTolerance = { tieGapSigma: 0.5, logitTolSigma: 0.5 };

/**
 * Batched vs alone on batch-invariant engines (the default, `ShardSpec.batchInvariant`): each
 * sequence has its own KV stream and the CPU runs the same kernel for every batch shape, so a
 * session's logits are bit-identical alone and batched. Nothing is a near-tie.
 */
export const EXACT: BatchTolerance = { tieGapSigma: 0, logitTolSigma: 0 };

/** Whether a comparison under EXACT passed: same tokens, logits equal bit for bit. */
export const bitIdentical = (a: { kind: string; maxDiffSigma?: number }) =>
  a.kind === "identical" && a.maxDiffSigma === 0;

/**
 * Across engines or backends (native x86 SIMD vs WASM SIMD vs WebGPU vs Vulkan), fed the same
 * tokens: kernels round differently, and which way depends on the CPU's SIMD width (AVX2 vs
 * AVX-512 pick different native kernels), so an exact token comparison that holds on one
 * machine fails on another. A differing pick is accepted only where the reference's top-2
 * gap is under tieGapSigma; every step's logits must stay within logitTolSigma.
 * Measured on SmolLM2 Q4_1, teacher-forced, against native whole-model CPU: WASM CPU 0.31–0.58 σ,
 * WebGPU (lavapipe) 0.47–0.49 σ. On an AVX-512 Xeon built without AMX the first greedy step is a
 * tie at 0.012 σ that WASM and WebGPU both pick the other way (token 2 vs 198); with AMX, or on
 * AVX2, they agree. A skipped layer moves logits by several σ and fails.
 */
export const CROSS_ENGINE_TOLERANCE: BatchTolerance = { tieGapSigma: 0.5, logitTolSigma: 1.0 };
