// A client's HTTP/2 bytes less its GOAWAY frames, however TCP cuts them.
import { describe, expect, it } from "vitest";
import { GoawayStrip } from "../../node-apis/http/goaway-strip.ts";
import { xorshift32 } from "../../src/model/seeded.ts";

const PREFACE = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** One frame: 9-byte header (24-bit length, type, flags, stream id), then its payload. */
function frame(type: number, payload: Uint8Array, stream = 1): Uint8Array {
  const f = new Uint8Array(9 + payload.length);
  f[0] = payload.length >> 16;
  f[1] = (payload.length >> 8) & 0xff;
  f[2] = payload.length & 0xff;
  f[3] = type;
  new DataView(f.buffer).setUint32(5, stream);
  f.set(payload, 9);
  return f;
}

const join = (parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return out;
};

/** `bytes` through a strip in chunks cut at random places. */
function throughStrip(bytes: Uint8Array, next: () => number) {
  const strip = new GoawayStrip();
  const out: Uint8Array[] = [];
  for (let at = 0; at < bytes.length;) {
    const n = 1 + (next() % 40);
    // a copy, as a socket's buffer is reused for the next read
    out.push(strip.take(bytes.slice(at, at + n)).slice());
    at += n;
  }
  return { out: join(out), stripped: strip.stripped };
}

describe("GOAWAY strip", () => {
  it("passes every frame but GOAWAY, byte for byte, wherever the chunks are cut", () => {
    const next = xorshift32(11);
    for (let trial = 0; trial < 200; trial++) {
      const frames: Array<{ bytes: Uint8Array; goaway: boolean }> = [];
      for (let i = 0; i < 30; i++) {
        // GOAWAY (7) now and then among HEADERS, DATA, SETTINGS, PING, WINDOW_UPDATE, RST_STREAM;
        // some payloads hold the GOAWAY type byte where a header would be misread
        const type = [1, 0, 4, 6, 8, 3, 7][next() % 7];
        const payload = new Uint8Array(next() % 70).map(() => (next() % 3 === 0 ? 7 : next() & 0xff));
        frames.push({ bytes: frame(type, payload, 1 + 2 * i), goaway: type === 7 });
      }
      const sent = join([PREFACE, ...frames.map((f) => f.bytes)]);
      const expected = join([PREFACE, ...frames.filter((f) => !f.goaway).map((f) => f.bytes)]);
      const { out, stripped } = throughStrip(sent, next);
      expect(out).toEqual(expected);
      expect(stripped).toBe(frames.filter((f) => f.goaway).length);
    }
  });

  it("hands a chunk on uncopied when nothing is cut out of it", () => {
    const strip = new GoawayStrip();
    const chunk = join([PREFACE, frame(4, new Uint8Array(6)), frame(0, new Uint8Array(100).fill(7))]);
    const pass = strip.take(chunk);
    expect(pass).toEqual(chunk);
    expect(pass.buffer).toBe(chunk.buffer);
  });

  it("holds a frame header cut by a chunk's end until its type is known", () => {
    const strip = new GoawayStrip();
    const goaway = frame(7, new Uint8Array(8));
    const ping = frame(6, new Uint8Array(8));
    expect(strip.take(join([PREFACE, goaway.subarray(0, 5)]))).toEqual(PREFACE);
    expect(strip.take(join([goaway.subarray(5), ping.subarray(0, 4)])).length).toBe(0);
    expect(strip.take(ping.subarray(4))).toEqual(ping);
    expect(strip.stripped).toBe(1);
  });
});
