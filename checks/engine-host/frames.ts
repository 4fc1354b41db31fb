// Length-prefixed frames between a parent and a shard process on stdin/stdout:
// [u32 total][u32 header length][JSON header][binary payload]. Payloads are raw
// typed arrays, never JSON, so hidden states cross the pipe as bytes.
const MAX_FRAME = 1 << 30;

export interface Frame {
  readonly header: Record<string, unknown>;
  readonly payload: Uint8Array;
}

export function encodeFrame(header: Record<string, unknown>, parts: ArrayBufferView[] = []): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const size = 8 + json.length + parts.reduce((n, p) => n + p.byteLength, 0);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint32(0, size, true);
  view.setUint32(4, json.length, true);
  out.set(json, 8);
  let o = 8 + json.length;
  for (const p of parts) {
    out.set(new Uint8Array(p.buffer, p.byteOffset, p.byteLength), o);
    o += p.byteLength;
  }
  return out;
}

/** Reads whole frames from a byte stream, however it was chunked. */
export async function* readFrames(stream: ReadableStream<Uint8Array>): AsyncGenerator<Frame> {
  let buf = new Uint8Array(0);
  for await (const chunk of stream) {
    const joined = new Uint8Array(buf.length + chunk.length);
    joined.set(buf);
    joined.set(chunk, buf.length);
    buf = joined;
    while (buf.length >= 8) {
      const view = new DataView(buf.buffer, buf.byteOffset);
      const size = view.getUint32(0, true);
      const jsonLen = view.getUint32(4, true);
      if (size < 8 + jsonLen || size > MAX_FRAME) {
        throw new Error(`malformed frame: size ${size}, header ${jsonLen}`);
      }
      if (buf.length < size) break;
      const header = JSON.parse(new TextDecoder().decode(buf.subarray(8, 8 + jsonLen)));
      yield { header, payload: buf.slice(8 + jsonLen, size) };
      buf = buf.slice(size);
    }
  }
}

/** Slices a payload into typed arrays of the given kinds and lengths, copying for alignment. */
export function splitPayload(
  payload: Uint8Array,
  layout: Array<["i32" | "f32" | "u8", number]>,
): Array<Int32Array | Float32Array | Uint8Array> {
  let o = 0;
  return layout.map(([kind, n]) => {
    const width = kind === "u8" ? 1 : 4;
    const bytes = payload.slice(o, o + n * width);
    if (bytes.length !== n * width) throw new Error(`payload too short for ${n} × ${kind}`);
    o += n * width;
    return kind === "i32"
      ? new Int32Array(bytes.buffer)
      : kind === "f32"
      ? new Float32Array(bytes.buffer)
      : bytes;
  });
}
