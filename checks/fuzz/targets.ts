// What the fuzzer feeds: each parser a stranger's bytes reach, with valid seeds to change
// and the path those bytes take after parsing (a frame's tensors unpacked with the checks a
// shard applies, a header's manifest and KV shape worked out, a tracker call answered, a
// manifest or a piece answer taken into a download: artifact-origin.ts), and whole GGUF files
// loaded by the engine's C API under AddressSanitizer (gguf-load.ts).
import { create, type DescMessage, fromBinary, toBinary } from "@bufbuild/protobuf";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { decodeEnvelope, encodeEnvelope } from "../../src/relay/envelope.ts";
import { ElementType, Phase, type SeamFrame, SeamFrameSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { Compression } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import {
  DoneRequestSchema,
  HeartbeatRequestSchema,
  LeaveRequestSchema,
  NodesRequestSchema,
  PlaceRequestSchema,
  RegisterRequestSchema,
  RouteRequestSchema,
} from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { checkFrame, decodeReply, encodeFrame } from "../../src/seam/frame.ts";
import type { SeamServe } from "../../src/seam/link.ts";
import { type ByteDuplex, serveMux } from "../../src/seam/mux.ts";
import { prng } from "./mutate.ts";
import { SCHEMA_VERSION } from "../../src/seam/limits.ts";
import { packTensor, unpackTensor } from "../../src/seam/tensor.ts";
import { crc32c } from "../../src/seam/crc32c.ts";
import { generateRouteKey, signTicket, verifyTicket } from "../../src/route/ticket.ts";
import { parseRequest } from "../../src/gateway/openai.ts";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { buildManifest, shardBytes } from "../../src/gguf/manifest.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { headerGraphShape } from "../../src/gguf/graph-shape.ts";
import { synthModel } from "../../src/model/synth.ts";
import { MemoryStorage } from "../../src/tracker/membership/storage.ts";
import { TrackerCore } from "../../src/tracker/core/tracker-core.ts";
import type { FuzzTarget } from "./target.ts";
import { ggufLoad } from "./gguf-load.ts";
import { artifactOrigin } from "./artifact-origin.ts";

const N_EMBD = 64;
const ARTIFACT = "ab".repeat(32);

/** The route key the seeds' tickets are signed with, and its public half for checking. */
const keys = generateRouteKey();

async function frames(): Promise<Uint8Array[]> {
  const { privateKey } = await keys;
  const base = {
    schemaVersion: SCHEMA_VERSION,
    sessionId: "s-1",
    routeEpoch: 3n,
    artifactSha256: hexToBytes(ARTIFACT),
    range: { start: 4, end: 8 },
  };
  const ticket = await signTicket(
    privateKey,
    { sessionId: "s-1", routeEpoch: 3n, artifactSha256: hexToBytes(ARTIFACT), range: { start: 4, end: 8 } },
    60_000,
    "tracker",
  );
  const hidden = (rows: number) => Float32Array.from({ length: rows * N_EMBD }, (_, i) => Math.sin(i));
  return [
    create(SeamFrameSchema, {
      ...base,
      phase: Phase.OPEN,
      open: {
        routeTicket: ticket,
        kvCells: 256,
        sampling: { temperature: 0.8 },
        nextHops: [{ url: "http://b:1", range: { start: 8, end: 12 }, routeTicket: ticket }],
      },
    }),
    create(SeamFrameSchema, {
      ...base,
      phase: Phase.PREFILL,
      positions: { start: 0, count: 3 },
      chunkCount: 1,
      tensors: [packTensor("hidden_states", hidden(3), [3, N_EMBD])],
    }),
    create(SeamFrameSchema, {
      ...base,
      phase: Phase.PREFILL,
      positions: { start: 0, count: 2 },
      chunkCount: 1,
      tensors: [packTensor("hidden_states", hidden(2), [2, N_EMBD], Compression.Q8_ROW)],
    }),
    create(SeamFrameSchema, {
      ...base,
      phase: Phase.DECODE,
      positions: { start: 5, count: 1 },
      tensors: [packTensor("hidden_states", hidden(1), [1, N_EMBD], Compression.Q8_BLOCK32)],
    }),
    create(SeamFrameSchema, {
      ...base,
      phase: Phase.PREFILL,
      range: { start: 0, end: 4 },
      positions: { start: 0, count: 4 },
      chunkCount: 1,
      tensors: [packTensor("token_ids", Int32Array.from([1, 2, 3, 4]), [4])],
    }),
  ].map(encodeFrame);
}

/** What a shard does with a frame's bytes before its engine sees anything (decodeFrame's
 *  size and schema checks, then shardChecks). */
const shardSide = (bytes: Uint8Array, publicKey: CryptoKey) => shardChecks(decodeReply(bytes), publicKey);

/** A shard's checks on a decoded frame: the frame's own, its ticket, its tensors. */
async function shardChecks(f: SeamFrame, publicKey: CryptoKey): Promise<void> {
  checkFrame(f);
  if (f.phase === Phase.OPEN) {
    await verifyTicket(publicKey, f.open!.routeTicket, {
      sessionId: f.sessionId,
      routeEpoch: f.routeEpoch,
      artifactSha256: f.artifactSha256,
      range: f.range!,
    });
    return;
  }
  const count = f.positions?.count ?? 0;
  for (const t of f.tensors) {
    if (t.name === "token_ids") {
      unpackTensor(t, { name: "token_ids", elementType: ElementType.I32, cols: count });
    } else {unpackTensor(t, {
        name: "hidden_states",
        elementType: ElementType.F32,
        cols: N_EMBD,
        rows: count,
      });}
  }
}

/** The frame with each tensor's CRC-32C over its bytes as they now are. */
function frameWithChecksums(input: Uint8Array): Uint8Array {
  try {
    const f = fromBinary(SeamFrameSchema, input);
    for (const t of f.tensors) t.crc32c = crc32c(t.data, t.rowScales);
    return toBinary(SeamFrameSchema, f);
  } catch {
    return input;
  }
}

const seamFrame: FuzzTarget = {
  name: "seam-frame",
  proto: true,
  fixup: frameWithChecksums,
  seeds: frames,
  async start() {
    const { publicKey } = await keys;
    return (input) => shardSide(input, publicKey);
  },
};

const relayEnvelope: FuzzTarget = {
  name: "relay-envelope",
  proto: true,
  fixup(input) {
    try {
      const e = decodeEnvelope(input);
      const frame = frameWithChecksums(e.payload);
      const out = new Uint8Array(input.length - e.payload.length + frame.length);
      out.set(input.subarray(0, input.length - e.payload.length));
      out.set(frame, input.length - e.payload.length);
      return out;
    } catch {
      return input;
    }
  },
  async seeds() {
    const f = await frames();
    return [
      encodeEnvelope({ to: "node-b", from: "node-a", channel: "c7", kind: 1 }, f[1]),
      encodeEnvelope({ to: "node-b", from: "node-a", channel: "c8", kind: 2 }, f[0]),
      encodeEnvelope({ to: "node-a", channel: "c7", error: "gone" }),
    ];
  },
  async start() {
    const { publicKey } = await keys;
    return async (input) => {
      const e = decodeEnvelope(input);
      if (e.payload.length > 0) await shardSide(e.payload, publicKey);
    };
  },
};

/** One fast-seam message: body length u32 LE, channel u32 LE, kind u8, then the body. */
function muxMessage(channel: number, kind: number, body: Uint8Array = new Uint8Array(0)): Uint8Array {
  const m = new Uint8Array(9 + body.length);
  const v = new DataView(m.buffer);
  v.setUint32(0, body.length, true);
  v.setUint32(4, channel, true);
  m[8] = kind;
  m.set(body, 9);
  return m;
}

const concat = (parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, at), at += p.length;
  return out;
};

/** A connection's bytes after the preface, cut at places the input itself picks (as TCP may). */
const fastSeam: FuzzTarget = {
  name: "fast-seam",
  proto: false,
  async seeds() {
    const f = await frames();
    const [OPEN, DATA, END, ERROR] = [4, 1, 2, 3];
    return [
      concat([muxMessage(1, OPEN), muxMessage(1, DATA, f[0]), muxMessage(1, DATA, f[1]), muxMessage(1, END)]),
      concat([
        muxMessage(1, OPEN),
        muxMessage(2, OPEN),
        muxMessage(2, DATA, f[3]),
        muxMessage(1, DATA, f[2]),
        muxMessage(2, ERROR, text.encode("gone")),
        muxMessage(1, END),
      ]),
    ];
  },
  async start() {
    const { publicKey } = await keys;
    // a shard's side of each stream: every frame checked as a shard checks it, one reply each;
    // the first error a stream ended with is this input's outcome (the mux itself swallows them)
    let ended: unknown;
    const serve: SeamServe = async (frames, reply) => {
      try {
        for await (const f of frames) {
          await shardChecks(f, publicKey);
          reply(f);
        }
      } catch (e) {
        ended ??= e;
        throw e;
      }
    };
    return async (input) => {
      ended = undefined;
      const data: ((c: Uint8Array) => void)[] = [], closers: ((why: string) => void)[] = [];
      let written = 0;
      const duplex: ByteDuplex = {
        write: (parts) => void (written += parts.reduce((n, p) => n + p.length, 0)),
        onData: (h) => void data.push(h),
        onClose: (h) => void closers.push(h),
        close: () => {},
      };
      serveMux(duplex, serve, new Uint8Array(0));
      const cut = prng(input.length * 2654435761 + (input[0] ?? 0));
      for (let at = 0; at < input.length;) {
        const n = 1 + cut() % 64;
        for (const h of data) h(input.subarray(at, at + n));
        at += n;
        await Promise.resolve();
      }
      // the streams' replies go out, then the connection drops
      await new Promise((r) => setTimeout(r, 0));
      for (const h of closers) h("fuzz input ended");
      if (written === 0) throw new Error("not even the accept was written");
      if (ended !== undefined) throw ended;
    };
  },
};

const text = new TextEncoder();

/** Values a hostile client sends where a field's value belongs. */
const ODD_VALUES: unknown[] = [
  null,
  true,
  -1,
  0,
  1e308,
  -1e308,
  2 ** 53 + 1,
  0.5,
  "",
  "x".repeat(70_000),
  "\u0000",
  [],
  [[[[[]]]]],
  {},
  { role: "user" },
  [{ type: "image_url" }],
  [{ type: "text", text: 7 }],
  Array.from({ length: 300 }, () => "s"),
];

/** One value somewhere in a JSON document replaced by an odd one, or a key dropped or added. */
function changeJson(seed: Uint8Array, next: () => number): Uint8Array {
  const doc = JSON.parse(new TextDecoder().decode(seed));
  const places: [Record<string, unknown>, string][] = [];
  const walk = (v: unknown) => {
    if (!v || typeof v !== "object") return;
    for (const k of Object.keys(v)) {
      places.push([v as Record<string, unknown>, k]);
      walk((v as Record<string, unknown>)[k]);
    }
  };
  walk(doc);
  for (let n = 1 + next() % 3; n > 0 && places.length; n--) {
    const [obj, key] = places[next() % places.length];
    const op = next() % 4;
    if (op === 0) delete obj[key];
    else if (op === 1) obj[`${key}_${next() % 4}`] = ODD_VALUES[next() % ODD_VALUES.length];
    else obj[key] = ODD_VALUES[next() % ODD_VALUES.length];
  }
  return text.encode(JSON.stringify(doc));
}

const gatewayJson: FuzzTarget = {
  name: "gateway-json",
  proto: false,
  change: changeJson,
  seeds: () =>
    Promise.resolve([
      { model: "smollm2", messages: [{ role: "user", content: "Hello" }], max_tokens: 16, stream: true },
      {
        model: "smollm2",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: [{ type: "text", text: "Why?" }] },
        ],
        temperature: 0.7,
        top_p: 0.9,
        seed: 4,
        stop: ["\n", "END"],
        stream_options: { include_usage: true },
      },
      { model: "smollm2", prompt: "Once upon", max_tokens: 8, temperature: 0, logprobs: 2 },
      { model: "smollm2", prompt: ["a", "b"], n: 1, presence_penalty: 0.5 },
    ].map((b) => text.encode(JSON.stringify(b)))),
  start() {
    const decoder = new TextDecoder();
    return Promise.resolve((input) => {
      let body: unknown;
      try {
        body = JSON.parse(decoder.decode(input));
      } catch (e) {
        // not JSON: the gateway answers 400 before parsing a request
        throw new Error(`not JSON: ${e instanceof Error ? e.message : e}`);
      }
      // both endpoints' parsers; refused (an ApiError, a 400) when neither takes it
      let refusal: unknown, taken = false;
      for (const kind of ["chat", "completion"] as const) {
        try {
          parseRequest(kind, body);
          taken = true;
        } catch (e) {
          if (!(e instanceof Error) || e.constructor.name !== "ApiError") throw e;
          refusal = e;
        }
      }
      if (!taken) throw refusal;
    });
  },
};

const model = synthModel({ arch: "qwen3", nLayer: 6 });
const ggufHeader: FuzzTarget = {
  name: "gguf-header",
  proto: false,
  seeds() {
    const h = parseGgufHeader(model, { fileSize: model.length });
    const gemma = synthModel({ arch: "gemma3", nLayer: 4 });
    const g = parseGgufHeader(gemma, { fileSize: gemma.length });
    return Promise.resolve([model.slice(0, h.headerSize), gemma.slice(0, g.headerSize)]);
  },
  start() {
    // the file the header claims to head: its size bounds every tensor's place
    return Promise.resolve((input) => {
      const h = parseGgufHeader(input, { fileSize: model.length });
      const m = buildManifest(h, model.length, ARTIFACT);
      const kv = kvShape(h);
      headerGraphShape(h);
      if (kv.nLayer > 1) shardBytes(m, 0, Math.min(kv.nLayer, 2));
    });
  },
};

/** The tracker's calls, first byte choosing which; the core keeps its state between inputs. */
const CALLS: readonly [DescMessage, (core: TrackerCore, m: never) => unknown][] = [
  [RegisterRequestSchema, (c, m) => c.register(m)],
  [HeartbeatRequestSchema, (c, m) => c.heartbeat(m)],
  [LeaveRequestSchema, (c, m) => c.leave(m)],
  [DoneRequestSchema, (c, m) => c.done(m)],
  [RouteRequestSchema, (c, m) => c.route(m)],
  [NodesRequestSchema, (c, m: { nodes: string[] }) => c.nodes(m.nodes)],
  [PlaceRequestSchema, (c, m) => c.place(m)],
];

const trackerRpc: FuzzTarget = {
  name: "tracker-rpc",
  proto: true,
  seeds() {
    const artifact = hexToBytes(ARTIFACT);
    const shard = (start: number, end: number) => ({
      artifactSha256: artifact,
      range: { start, end },
      engine: "native-cpu",
      kvCells: 1024,
      maxSessions: 4,
      decodeTokensPerS: 20,
    });
    const call = (i: number, m: Parameters<typeof toBinary>[1]) =>
      Uint8Array.from([i, ...toBinary(CALLS[i][0], m)]);
    return Promise.resolve([
      call(0, create(RegisterRequestSchema, { node: "n1", urls: ["http://n1:1"], shard: shard(0, 3) })),
      call(0, create(RegisterRequestSchema, { node: "n2", urls: ["relay+ws://r/n2"], shard: shard(3, 6) })),
      call(1, create(HeartbeatRequestSchema, { node: "n1", sessions: 1, sessionIds: ["s1"] })),
      call(2, create(LeaveRequestSchema, { node: "n2" })),
      call(3, create(DoneRequestSchema, { sessionId: "s1", sessionIds: ["s2", "s3"] })),
      call(
        4,
        create(RouteRequestSchema, {
          artifactSha256: artifact,
          sessionId: "s1",
          count: 2,
          avoidNodes: ["n2"],
        }),
      ),
      call(5, create(NodesRequestSchema, { nodes: ["n1"] })),
      call(
        6,
        create(PlaceRequestSchema, { node: "n3", artifactSha256: artifact, memoryCapBytes: 1n << 20n }),
      ),
    ]);
  },
  async start() {
    const header = parseGgufHeader(model, { fileSize: model.length });
    const kv = kvShape(header);
    const core = await TrackerCore.open({
      storage: new MemoryStorage(),
      model: {
        artifact: ARTIFACT,
        nLayer: kv.nLayer,
        manifest: buildManifest(header, model.length, ARTIFACT),
        kv: kv.layers,
        graph: headerGraphShape(header),
      },
      leaseMs: 60_000,
      probe: () => Promise.resolve({ ok: true, maxAbsDiff: 0, allowed: 1, detail: "fuzz" }),
    });
    return async (input) => {
      if (input.length === 0) return;
      const [schema, call] = CALLS[input[0] % CALLS.length];
      let m;
      try {
        m = fromBinary(schema, input.subarray(1));
      } catch (e) {
        // not the message: Connect answers invalid_argument before the core sees it
        throw new Error(`not a ${schema.name}: ${e instanceof Error ? e.message : e}`);
      }
      await call(core, m as never);
    };
  },
};

export const TARGETS: readonly FuzzTarget[] = [
  seamFrame,
  fastSeam,
  relayEnvelope,
  trackerRpc,
  gatewayJson,
  ggufHeader,
  artifactOrigin,
  ggufLoad,
];
