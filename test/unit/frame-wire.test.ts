// The seam's own frame codec against protobuf-es: the same bytes out, the same message in, and
// the same refusals, over frames of every shape a route sends and the odd ones it may receive.
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it, vi } from "vitest";
import { mutate, prng } from "../../checks/fuzz/mutate.ts";
import { OpenSchema, Phase, type SeamFrame, SeamFrameSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { frameFromBinary, frameToBinary } from "../../src/seam/frame-wire.ts";

/** calls into protobuf-es's codec, counted (the codec under test falls back to it) */
const spent = vi.hoisted(() => ({ fromBinary: 0, toBinary: 0 }));
vi.mock("@bufbuild/protobuf", async (original) => {
  const pb = await original<typeof import("@bufbuild/protobuf")>();
  return {
    ...pb,
    fromBinary: (...a: Parameters<typeof pb.fromBinary>) => (spent.fromBinary++, pb.fromBinary(...a)),
    toBinary: (...a: Parameters<typeof pb.toBinary>) => (spent.toBinary++, pb.toBinary(...a)),
  };
});

type Rand = () => number;

/** draws in [0, 1) from the fuzzer's seeded stream */
const uniform = (next: () => number): Rand => () => next() / 2 ** 32;

function pick<T>(r: Rand, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)];
}

const u32 = (r: Rand) =>
  pick(r, [0, 1, 127, 128, 300, 16383, 16384, 2 ** 21, 2 ** 28, 2 ** 32 - 1, r() * 1e6 >>> 0]);
const f32 = (r: Rand) => pick(r, [0, -0, 1.5, -2.25, 1e-40, 3e38, NaN, Infinity, Math.fround(r() * 100)]);
const f64 = (r: Rand) => pick(r, [0, -0, 1764800000000.125, r() * 1e13, -1e-300]);
const str = (r: Rand) =>
  pick(r, ["", "s1", "node-a", "session/17", "x".repeat(200), "y".repeat(300), "naïve", "😀"]);
const bytes = (r: Rand, max: number) => Uint8Array.from({ length: Math.floor(r() * max) }, () => r() * 256);
const u64 = (r: Rand) => pick(r, [0n, 1n, 127n, 128n, 2n ** 32n, 2n ** 63n, 2n ** 64n - 1n]);
const range = (r: Rand) => (r() < 0.8 ? { start: u32(r), end: u32(r) } : undefined);

function randomFrame(r: Rand): SeamFrame {
  const phase = pick(r, [Phase.DECODE, Phase.PREFILL, Phase.RELEASE, Phase.OPEN, Phase.UNSPECIFIED]);
  return create(SeamFrameSchema, {
    schemaVersion: u32(r),
    workId: str(r),
    sessionId: str(r),
    routeEpoch: u64(r),
    artifactSha256: bytes(r, 40),
    recipeFingerprint: bytes(r, 12),
    range: range(r),
    phase,
    positions: r() < 0.7 ? { start: u32(r), count: u32(r) } : undefined,
    stepId: u64(r),
    cacheExpect: u32(r),
    cacheResult: u32(r),
    chunkIndex: u32(r),
    chunkCount: u32(r),
    tensors: Array.from({ length: Math.floor(r() * 3) }, () => ({
      name: str(r),
      shape: Array.from({ length: Math.floor(r() * 3) }, () => u32(r)),
      elementType: pick(r, [0, 1, 2, 3]),
      byteOrder: pick(r, [0, 1, 2]),
      compression: pick(r, [0, 1, 2, 3]),
      data: bytes(r, r() < 0.2 ? 3000 : 300),
      rowScales: bytes(r, 16),
      crc32c: u32(r),
    })),
    open: phase === Phase.OPEN
      ? { kvCells: 64, nextHops: [{ url: "tcp://a", range: { start: 1, end: 2 } }] }
      : undefined,
    status: r() < 0.1 ? { code: "malformed", message: "no" } : undefined,
    // a release's prefix keys
    keep: r() < 0.05 ? { blockTokens: 64, blocks: [bytes(r, 32), bytes(r, 32)] } : undefined,
    telemetry: Array.from({ length: Math.floor(r() * 4) }, () => ({
      node: str(r),
      range: range(r),
      queueMs: f32(r),
      computeMs: f32(r),
      batchSessions: u32(r),
      batchTokens: u32(r),
      bytesIn: u32(r),
      bytesOut: u32(r),
      sampleMs: f32(r),
      transport: pick(r, ["", "tcp", "grpc"]),
      codecMs: f32(r),
      receivedUnixMs: f64(r),
      sentUnixMs: f64(r),
    })),
    sampled: r() < 0.5
      ? { token: pick(r, [0, 1, 49151, -1, -(2 ** 31), 2 ** 31 - 1]), margin: f32(r) }
      : undefined,
    rebuild: r() < 0.2,
    hopPositions: Array.from({ length: Math.floor(r() * 4) }, () => u32(r)),
    crossings: u32(r),
  });
}

/** what each way does with the bytes: a message, or the error's text */
function outcome(read: (b: Uint8Array) => SeamFrame, b: Uint8Array): SeamFrame | string {
  try {
    return read(b);
  } catch (e) {
    return `error: ${e instanceof Error ? e.message : e}`;
  }
}

describe("the seam's frame codec", () => {
  it("writes the bytes protobuf-es writes and reads back what it reads, over 1,500 random frames", () => {
    const r = uniform(prng(11));
    let fast = 0;
    for (let i = 0; i < 1500; i++) {
      const f = randomFrame(r);
      const mine = frameToBinary(f);
      const theirs = toBinary(SeamFrameSchema, f);
      expect(mine).toEqual(theirs);
      const back = frameFromBinary(theirs);
      const ref = fromBinary(SeamFrameSchema, theirs);
      expect(back).toEqual(ref);
      // protobuf-es's own comparison (a NaN float is unequal even to the same bytes read twice)
      expect(equals(SeamFrameSchema, back, ref)).toBe(
        equals(SeamFrameSchema, ref, fromBinary(SeamFrameSchema, theirs)),
      );
      if (!f.open && !f.status && !f.keep) fast++;
    }
    // most frames take the codec's own path, not the fallback
    expect(fast).toBeGreaterThan(1000);
  });

  it("writes and reads a decode step's frame itself, never through protobuf-es", () => {
    const f = create(SeamFrameSchema, {
      schemaVersion: 1,
      workId: "s/2",
      sessionId: "s",
      routeEpoch: 1n,
      range: { start: 12, end: 30 },
      phase: Phase.DECODE,
      positions: { start: 9, count: 1 },
      stepId: 2n,
      tensors: [{
        name: "hidden_states",
        shape: [1, 4],
        elementType: 1,
        data: new Uint8Array(16),
        crc32c: 7,
      }],
      telemetry: [{ node: "a", range: { start: 0, end: 12 }, computeMs: 3.5, transport: "tcp" }],
      crossings: 2,
    });
    const bytes = toBinary(SeamFrameSchema, f);
    spent.fromBinary = spent.toBinary = 0;
    expect(frameToBinary(f)).toEqual(bytes);
    expect(frameFromBinary(bytes)).toEqual(f);
    expect(spent).toEqual({ fromBinary: 0, toBinary: 0 });
    // an OPEN is protobuf-es's
    const open = create(SeamFrameSchema, {
      ...f,
      phase: Phase.OPEN,
      open: create(OpenSchema, { kvCells: 9 }),
    });
    frameFromBinary(frameToBinary(open));
    expect(spent).toEqual({ fromBinary: 1, toBinary: 1 });
  });

  it("reads a message with unknown fields, unpacked lists and repeated blocks as protobuf-es does", () => {
    const base = toBinary(
      SeamFrameSchema,
      create(SeamFrameSchema, { sessionId: "s", range: { start: 0, end: 3 } }),
    );
    const odd = [
      [...base, 0xb8, 0x01, 5], // field 23 (unknown), varint
      [...base, 0xa8, 0x01, 7, 0xa8, 0x01, 9], // hop_positions unpacked
      [...base, 0x3a, 0x02, 0x08, 0x05], // range again: merged
      [...base, 0xa0, 0x01, 0x80, 0x80, 0x80, 0x80, 0x10], // rebuild set in a varint's high bits
    ].map((x) => Uint8Array.from(x));
    for (const b of odd) {
      expect(outcome(frameFromBinary, b)).toEqual(outcome((x) => fromBinary(SeamFrameSchema, x), b));
    }
  });

  it("refuses what protobuf-es refuses and accepts what it accepts, over 5,000 mutated frames", () => {
    const next = prng(5);
    const r = uniform(next);
    const seeds = Array.from({ length: 40 }, () => toBinary(SeamFrameSchema, randomFrame(r)));
    let refused = 0;
    for (let i = 0; i < 5000; i++) {
      const b = Uint8Array.from(mutate(seeds[i % seeds.length], seeds, next, true));
      const mine = outcome(frameFromBinary, b);
      const theirs = outcome((x) => fromBinary(SeamFrameSchema, x), b);
      expect(mine).toEqual(theirs);
      if (typeof theirs === "string") refused++;
    }
    expect(refused).toBeGreaterThan(100);
  });
});
