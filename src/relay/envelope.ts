// The relay's wire unit: u32 little-endian header length, a RelayHeader, then the payload
// (a Seam Frame's bytes, carried untouched). Reading one parses the header only.
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { type RelayHeader, RelayHeaderSchema } from "../gen/strata/relay/v1/relay_pb.ts";
import { SeamError } from "../seam/errors.ts";

/** Headers are names and a reason, never large. */
const MAX_HEADER_BYTES = 4096;

export interface Envelope {
  readonly header: RelayHeader;
  readonly payload: Uint8Array;
}

export function encodeEnvelope(
  header: MessageInitShape<typeof RelayHeaderSchema>,
  payload?: Uint8Array,
): Uint8Array {
  const h = toBinary(RelayHeaderSchema, create(RelayHeaderSchema, header));
  const out = new Uint8Array(4 + h.length + (payload?.length ?? 0));
  new DataView(out.buffer).setUint32(0, h.length, true);
  out.set(h, 4);
  if (payload) out.set(payload, 4 + h.length);
  return out;
}

export function decodeEnvelope(bytes: Uint8Array): Envelope {
  if (bytes.length < 4) throw new SeamError("malformed", `relay message of ${bytes.length} bytes`);
  const n = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0, true);
  if (n > MAX_HEADER_BYTES || 4 + n > bytes.length) {
    throw new SeamError("malformed", `relay header of ${n} bytes in a message of ${bytes.length}`);
  }
  let header: RelayHeader;
  try {
    header = fromBinary(RelayHeaderSchema, bytes.subarray(4, 4 + n));
  } catch (e) {
    throw new SeamError("malformed", `relay header: ${e instanceof Error ? e.message : e}`);
  }
  return { header, payload: bytes.subarray(4 + n) };
}
