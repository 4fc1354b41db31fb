// Engine errors are values with a code a caller can act on; each maps to one cause.

export type EngineErrorCode =
  | "bad_input" // malformed batch: lengths, token ids, hidden width, non-finite values
  | "bad_range" // layer range outside the model
  | "unsupported_arch" // architecture the fork does not run
  | "unknown_sequence" // sequence id not open on this engine
  | "bad_position" // positions not consecutive for a sequence
  | "kv_full" // the KV budget (cells or sequences) is exhausted
  | "load_failed" // the model file could not be loaded
  | "over_memory_cap" // the range's weights + KV + compute pass the memory cap: refused before loading
  | "engine_failed"; // the engine failed while computing

export class EngineError extends Error {
  override name = "EngineError";
  constructor(readonly code: EngineErrorCode, message: string) {
    super(message);
  }
}
