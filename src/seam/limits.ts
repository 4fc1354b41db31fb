// Protocol constants: one place for each.

export const SCHEMA_VERSION = 1;

/** Largest encoded frame a peer accepts (a prefill chunk of a very wide model fits). */
export const MAX_FRAME_BYTES = 64 << 20;
/** Largest tensor payload in one frame. */
export const MAX_TENSOR_BYTES = 48 << 20;
export const MAX_TENSORS_PER_FRAME = 8;
export const MAX_TENSOR_DIMS = 4;
/** A KV snapshot travels in chunks of this many bytes, the last one shorter (well inside a frame). */
export const SNAPSHOT_CHUNK_BYTES = 8 << 20;
/** Prefill travels in chunks of at most this many tokens; decode frames carry one. */
export const PREFILL_CHUNK_TOKENS = 256;
