// Seam Frames to and from bytes. Decoding refuses what is too large, malformed or of
// another schema before anything else looks at the frame.
import { Phase, type SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";
import { SeamError } from "./errors.ts";
import { frameFromBinary, frameToBinary } from "./frame-wire.ts";
import { MAX_FRAME_BYTES, MAX_TENSORS_PER_FRAME, PREFILL_CHUNK_TOKENS, SCHEMA_VERSION } from "./limits.ts";

export function encodeFrame(frame: SeamFrame): Uint8Array {
  const bytes = frameToBinary(frame);
  if (bytes.length > MAX_FRAME_BYTES) {
    throw new SeamError("too_large", `frame of ${bytes.length} bytes exceeds ${MAX_FRAME_BYTES}`);
  }
  return bytes;
}

/** Decodes a frame a peer sent toward a shard: every check of its phase applies. */
export function decodeFrame(bytes: Uint8Array): SeamFrame {
  const frame = decodeReply(bytes);
  checkFrame(frame);
  return frame;
}

/** Decodes a reply (which may refuse a frame that failed its own checks): size and schema only. */
export function decodeReply(bytes: Uint8Array): SeamFrame {
  if (bytes.length > MAX_FRAME_BYTES) {
    throw new SeamError("too_large", `frame of ${bytes.length} bytes exceeds ${MAX_FRAME_BYTES}`);
  }
  let frame: SeamFrame;
  try {
    frame = frameFromBinary(bytes);
  } catch (e) {
    throw new SeamError("malformed", `not a seam frame: ${e instanceof Error ? e.message : e}`);
  }
  if (frame.schemaVersion !== SCHEMA_VERSION) {
    throw new SeamError(
      "wrong_schema",
      `schema version ${frame.schemaVersion}; this peer speaks ${SCHEMA_VERSION}`,
    );
  }
  return frame;
}

/** What every frame must state, whatever its phase. */
export function checkFrame(frame: SeamFrame): void {
  if (frame.schemaVersion !== SCHEMA_VERSION) {
    throw new SeamError(
      "wrong_schema",
      `schema version ${frame.schemaVersion}; this peer speaks ${SCHEMA_VERSION}`,
    );
  }
  if (frame.phase === Phase.UNSPECIFIED) throw new SeamError("malformed", "frame has no phase");
  if (!frame.sessionId) throw new SeamError("malformed", "frame names no session");
  if (!frame.range || frame.range.start >= frame.range.end) {
    throw new SeamError("malformed", "frame names no layer range");
  }
  if (frame.tensors.length > MAX_TENSORS_PER_FRAME) {
    throw new SeamError(
      "too_large",
      `${frame.tensors.length} tensors in one frame (at most ${MAX_TENSORS_PER_FRAME})`,
    );
  }
  const carriesTokens = frame.phase === Phase.PREFILL || frame.phase === Phase.DECODE;
  if (carriesTokens && (!frame.positions || frame.positions.count === 0)) {
    throw new SeamError("malformed", "prefill and decode frames need positions");
  }
  if (frame.phase === Phase.DECODE && frame.positions!.count !== 1) {
    throw new SeamError("malformed", "a decode frame carries one position");
  }
  if (frame.phase === Phase.OPEN && !frame.open) {
    throw new SeamError("malformed", "an open frame needs its open block");
  }
}

/** Splits a prompt of n tokens starting at `start` into bounded prefill chunks. */
export function prefillChunks(start: number, n: number, chunk = PREFILL_CHUNK_TOKENS) {
  if (!Number.isInteger(n) || n < 1 || !Number.isInteger(chunk) || chunk < 1) {
    throw new SeamError("malformed", `cannot chunk ${n} tokens by ${chunk}`);
  }
  const count = Math.ceil(n / chunk);
  return Array.from({ length: count }, (_, i) => ({
    index: i,
    count,
    start: start + i * chunk,
    tokens: Math.min(chunk, n - i * chunk),
  }));
}
