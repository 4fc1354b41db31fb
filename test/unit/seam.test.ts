import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  ByteOrder,
  Compression,
  ElementType,
  Phase,
  SeamFrameSchema,
} from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { crc32c } from "../../src/seam/crc32c.ts";
import { decodeFrame, encodeFrame, prefillChunks } from "../../src/seam/frame.ts";
import { MAX_FRAME_BYTES, SCHEMA_VERSION } from "../../src/seam/limits.ts";
import { packTensor, unpackTensor } from "../../src/seam/tensor.ts";

const code = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
  return "ok";
};

function hidden(rows: number, cols: number, seed = 1): Float32Array {
  let s = seed;
  return Float32Array.from({ length: rows * cols }, () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s / 2 ** 32 - 0.5) * 8;
  });
}

const frame = (extra: Record<string, unknown> = {}) =>
  create(SeamFrameSchema, {
    schemaVersion: SCHEMA_VERSION,
    workId: "w1",
    sessionId: "s1",
    routeEpoch: 3n,
    range: { start: 12, end: 30 },
    phase: Phase.DECODE,
    positions: { start: 7, count: 1 },
    stepId: 8n,
    ...extra,
  });

describe("CRC-32C", () => {
  it("matches the standard check value", () => {
    expect(crc32c(new TextEncoder().encode("123456789"))).toBe(0xe3069283);
  });
});

describe("seam tensors", () => {
  it("round-trips f32 hidden states exactly and token ids", () => {
    const h = hidden(5, 576);
    const back = unpackTensor(packTensor("hidden_states", h, [5, 576]), {
      name: "hidden_states",
      elementType: ElementType.F32,
      cols: 576,
      rows: 5,
    });
    expect(back.values).toEqual(h);
    const ids = Int32Array.of(1, 2, 49151);
    expect(
      unpackTensor(packTensor("token_ids", ids, [3]), { name: "token_ids", elementType: ElementType.I32 })
        .values,
    )
      .toEqual(ids);
  });

  it("q8 rows stay within half a step of each row's scale, in a quarter of the bytes", () => {
    const h = hidden(4, 576);
    h[10] = 900; // an outlier channel in row 0 only
    const t = packTensor("hidden_states", h, [4, 576], Compression.Q8_ROW);
    expect(t.data.length + t.rowScales.length).toBe(4 * 576 + 16);
    const back = unpackTensor(t, { name: "hidden_states", elementType: ElementType.F32, cols: 576 }).values;
    for (let r = 0; r < 4; r++) {
      const row = h.subarray(r * 576, (r + 1) * 576);
      const step = Math.max(...row.map(Math.abs)) / 127;
      for (let c = 0; c < 576; c++) {
        expect(Math.abs(back[r * 576 + c] - row[c])).toBeLessThanOrEqual(step / 2 + 1e-6);
      }
    }
  });

  it("q8 blocks confine an outlier channel to its block of 32; a short last block works", () => {
    const h = hidden(2, 50); // blocks of 32 and 18
    h[10] = 900; // an outlier in row 0, block 0
    const t = packTensor("hidden_states", h, [2, 50], Compression.Q8_BLOCK32);
    expect(t.data.length + t.rowScales.length).toBe(2 * 50 + 4 * 4);
    const back = unpackTensor(t, { name: "hidden_states", elementType: ElementType.F32, cols: 50 }).values;
    for (let r = 0; r < 2; r++) {
      for (const [from, to] of [[0, 32], [32, 50]]) {
        const block = h.subarray(r * 50 + from, r * 50 + to);
        const step = Math.max(...block.map(Math.abs)) / 127;
        for (let c = from; c < to; c++) {
          expect(Math.abs(back[r * 50 + c] - h[r * 50 + c])).toBeLessThanOrEqual(step / 2 + 1e-6);
        }
      }
    }
    // row 0's second block keeps its own precision despite the outlier in the first
    const second = h.subarray(32, 50);
    expect(Math.max(...second.map((x, i) => Math.abs(back[32 + i] - x)))).toBeLessThan(900 / 127 / 2 / 10);
    // a scale count that does not match the blocks is refused
    const bad = packTensor("hidden_states", h, [2, 50], Compression.Q8_BLOCK32);
    bad.shape = [5, 20]; // 5 blocks, 4 scales
    expect(code(() => unpackTensor(bad, { name: "hidden_states", elementType: ElementType.F32 }))).toBe(
      "bad_tensor",
    );
  });

  it("refuses a flipped byte, a wrong width, a short payload and unset fields", () => {
    const t = packTensor("hidden_states", hidden(2, 8), [2, 8]);
    const want = { name: "hidden_states", elementType: ElementType.F32 as const, cols: 8 };
    t.data[3] ^= 1;
    expect(code(() => unpackTensor(t, want))).toBe("checksum");
    expect(
      code(() => unpackTensor(packTensor("hidden_states", hidden(2, 8), [2, 8]), { ...want, cols: 576 })),
    )
      .toBe("bad_tensor");
    expect(code(() => unpackTensor(packTensor("hidden_states", hidden(2, 8), [2, 8]), { ...want, rows: 3 })))
      .toBe("bad_tensor");
    const short = packTensor("hidden_states", hidden(2, 8), [2, 8]);
    short.data = short.data.slice(0, 60);
    short.crc32c = crc32c(short.data);
    expect(code(() => unpackTensor(short, want))).toBe("bad_tensor");
    const unset = packTensor("hidden_states", hidden(2, 8), [2, 8]);
    unset.byteOrder = ByteOrder.UNSPECIFIED;
    expect(code(() => unpackTensor(unset, want))).toBe("bad_tensor");
    const huge = packTensor("hidden_states", hidden(2, 8), [2, 8]);
    huge.shape = [1 << 20, 1 << 12];
    expect(code(() => unpackTensor(huge, { ...want, cols: undefined }))).toBe("too_large");
  });

  it("reads big-endian tensors from a peer that sends them", () => {
    const h = Float32Array.of(1.5, -2.25, 3, 1e-3);
    const t = packTensor("hidden_states", h, [1, 4]);
    const be = t.data.slice();
    for (let i = 0; i < be.length; i += 4) be.subarray(i, i + 4).reverse();
    t.data = be;
    t.byteOrder = ByteOrder.BIG_ENDIAN;
    t.crc32c = crc32c(be);
    expect(unpackTensor(t, { name: "hidden_states", elementType: ElementType.F32, cols: 4 }).values).toEqual(
      h,
    );
  });
});

describe("seam tensors from HTTP/2 transports", () => {
  it("reads bytes handed over as a view into a larger pooled buffer (Node Buffer)", () => {
    const values = Float32Array.from({ length: 6 }, (_, i) => i * 1.5 - 2);
    const t = packTensor("hidden_states", values, [2, 3]);
    // a Buffer from the pool: slice() on it is a view, not a copy
    const pool = Buffer.alloc(8192);
    pool.set(t.data, 1001);
    t.data = pool.subarray(1001, 1001 + t.data.length);
    const out = unpackTensor(t, { name: "hidden_states", elementType: ElementType.F32, cols: 3, rows: 2 });
    expect(Array.from(out.values)).toEqual(Array.from(values));
  });
});

describe("seam frames", () => {
  it("round-trips a decode frame", () => {
    const f = frame({ tensors: [packTensor("hidden_states", hidden(1, 16), [1, 16])] });
    const back = decodeFrame(encodeFrame(f));
    expect(back.sessionId).toBe("s1");
    expect(back.routeEpoch).toBe(3n);
    expect(back.tensors[0].shape).toEqual([1, 16]);
  });

  it("refuses truncated, foreign-schema, oversized and incomplete frames", () => {
    const bytes = encodeFrame(frame({ tensors: [packTensor("hidden_states", hidden(1, 64), [1, 64])] }));
    expect(code(() => decodeFrame(bytes.subarray(0, bytes.length - 7)))).toBe("malformed");
    expect(code(() => decodeFrame(toBinary(SeamFrameSchema, frame({ schemaVersion: 2 }))))).toBe(
      "wrong_schema",
    );
    expect(code(() => decodeFrame(new Uint8Array(MAX_FRAME_BYTES + 1)))).toBe("too_large");
    expect(code(() => decodeFrame(toBinary(SeamFrameSchema, frame({ phase: Phase.UNSPECIFIED }))))).toBe(
      "malformed",
    );
    expect(code(() => decodeFrame(toBinary(SeamFrameSchema, frame({ positions: { start: 0, count: 2 } })))))
      .toBe("malformed");
    expect(code(() => decodeFrame(toBinary(SeamFrameSchema, frame({ phase: Phase.OPEN }))))).toBe(
      "malformed",
    );
  });

  it("chunks a long prefill into bounded frames that cover it once", () => {
    const chunks = prefillChunks(0, 600, 256);
    expect(chunks.map((c) => [c.start, c.tokens])).toEqual([[0, 256], [256, 256], [512, 88]]);
    expect(chunks.every((c) => c.count === 3)).toBe(true);
    expect(code(() => prefillChunks(0, 0))).toBe("malformed");
  });
});
