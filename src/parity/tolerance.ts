// The numbers that decide "equal" in parity runs. One place; never loosened to pass a run.

/**
 * Hidden states at a seam, range vs whole, relative to the seam's largest |h|.
 * The range and the whole model run the same kernels on the same shapes, so on one
 * backend they agree bit for bit (measured: 0 on CPU); the slack only absorbs a backend
 * that reorders a reduction between graph layouts.
 */
export const HIDDEN_REL_TOL = 1e-4;

/**
 * Batched vs alone. Batched decode multiplies n rows where the alone run multiplies one,
 * and llama.cpp picks kernels by batch size, so sums are taken in another order. Those
 * differences are measured in units of σ, the standard deviation of the reference step's
 * logits (≈2.6 on SmolLM2, ≈6 on the synthetic models), because absolute logit scales
 * differ between models. A divergence is a near-tie only when the reference's top-2 gap
 * there is under tieGapSigma and all earlier logits agree within logitTolSigma. Each
 * backend's bound is twice the largest drift measured on it over the suite's 32-step runs,
 * so noise passes and a real difference (a wrong KV cell, a missing layer: tens of % σ)
 * does not.
 */
export interface BatchTolerance {
  readonly tieGapSigma: number;
  readonly logitTolSigma: number;
}

export const BATCH_TOLERANCE: Readonly<Record<string, BatchTolerance>> = {
  // measured: 0 on SmolLM2 Q4_1 (bit-identical), ≤ 0.9 % σ on the synthetic F32 models
  cpu: { tieGapSigma: 0.02, logitTolSigma: 0.02 },
  // measured: ≤ 3.6 % σ on lavapipe; batched matmuls round activations to f16 there,
  // the one-row path keeps them in f32
  vulkan: { tieGapSigma: 0.075, logitTolSigma: 0.075 },
  // not measured yet (no GPU here): the Vulkan bound, as its batched kernels also use f16
  cuda: { tieGapSigma: 0.075, logitTolSigma: 0.075 },
};
