// Seam errors: a code a peer can act on, mapped to a gRPC/Connect status at the edge.

export type SeamErrorCode =
  | "malformed" // bytes that do not decode as a frame, or a frame missing what its phase needs
  | "wrong_schema" // another schema version
  | "too_large" // a frame or tensor past the limits
  | "checksum" // tensor bytes that do not match their CRC-32C
  | "bad_tensor" // shape, element type, byte order or compression that do not fit
  | "wrong_epoch" // a route epoch other than the session's
  | "wrong_shard" // a frame addressed to another layer range or model artifact
  | "wrong_recipe" // hidden states from another engine build than the one the session opened with
  | "bad_position" // positions that do not continue the session's cache
  | "unavailable" // the next shard cannot be reached or went away
  | "deadline" // no reply within the step deadline
  | "expired" // the session's lease lapsed while idle
  | "stream_failed" // the stream under the session broke (size limit, undecodable bytes, peer gone)
  | "unknown_session"
  | "unauthenticated" // missing, forged or expired route ticket
  | "kv_full"
  | "context_full" // the session's KV cells are used up (its own cap, or the shared pool ran short): it ends with length
  | "overloaded" // queue bound reached
  | "resume_failed" // a repaired route could not continue the session where it stood
  | "cancelled"; // the session was released or cancelled before the step ran

export class SeamError extends Error {
  override name = "SeamError";
  constructor(readonly code: SeamErrorCode, message: string) {
    super(message);
  }
}
