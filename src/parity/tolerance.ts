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
 * differ between models. Measured drift over 32 steps: 0 on SmolLM2 Q4_1 (bit-identical),
 * up to 0.9 % σ on synthetic F32 models (qwen3moe). A divergence is a near-tie only when
 * the reference's top-2 gap there is under TIE_GAP_SIGMA and all earlier logits agree
 * within LOGIT_TOL_SIGMA: twice the largest drift seen, so noise passes and a real
 * difference (a wrong KV cell, a missing layer: tens of % σ) does not.
 */
export const TIE_GAP_SIGMA = 0.02;
export const LOGIT_TOL_SIGMA = 0.02;
