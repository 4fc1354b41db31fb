// The fast seam: seam streams multiplexed on one byte stream, over an in-memory connection
// that cuts the bytes at odd places (as TCP may), and over real sockets beside gRPC on one port.
import { create, equals } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it } from "vitest";
import {
  NodeInfoSchema,
  Phase,
  type SeamFrame,
  SeamFrameSchema,
} from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { deferredLink } from "../../src/seam/deferred-link.ts";
import { SeamError } from "../../src/seam/errors.ts";
import { MAX_FRAME_BYTES, SCHEMA_VERSION } from "../../src/seam/limits.ts";
import type { SeamLink, SeamServe } from "../../src/seam/link.ts";
import { FAST_ACCEPT, FAST_PREFACE, MessageReader, MuxClient, serveMux } from "../../src/seam/mux.ts";
import { packTensor } from "../../src/seam/tensor.ts";
import { FastSeams } from "../../node-apis/seam/fast.ts";
import { GrpcSeams, serveSeams } from "../../node-apis/seam/grpc.ts";
import { Inbox } from "../fakes/inbox.ts";
import { type MemoryEnd, pair } from "../fakes/memory-duplex.ts";

const frame = (step: number, floats = 8): SeamFrame =>
  create(SeamFrameSchema, {
    schemaVersion: SCHEMA_VERSION,
    sessionId: "s",
    routeEpoch: 1n,
    range: { start: 0, end: 2 },
    phase: Phase.DECODE,
    stepId: BigInt(step),
    positions: { start: step, count: 1 },
    tensors: [packTensor("hidden_states", new Float32Array(floats).map((_, i) => i * step), [1, floats])],
  });

/** A listener end: takes the preface, then serves the streams (within `limits`, if given). */
function listen(
  server: MemoryEnd,
  serve: SeamServe,
  limits?: { channels: number; queuedBytes: number },
): void {
  let head = new Uint8Array(0);
  let taken = false;
  server.onData((chunk) => {
    if (taken) return;
    const joined = new Uint8Array(head.length + chunk.length);
    joined.set(head);
    joined.set(chunk, head.length);
    head = joined;
    if (head.length < FAST_PREFACE.length) return;
    taken = true;
    serveMux(server, serve, head.subarray(FAST_PREFACE.length), undefined, "tcp", limits);
  });
}

/** A serve that answers every frame with itself and records how its stream ended. */
function echo() {
  const ends: string[] = [];
  const serve: SeamServe = async (frames, reply, transport) => {
    expect(transport).toBe("tcp");
    try {
      for await (const f of frames) reply(f);
      ends.push("end");
    } catch (e) {
      ends.push(`${(e as SeamError).code}: ${(e as Error).message}`);
    }
  };
  return { serve, ends };
}

async function connected(serve: SeamServe, piece?: () => number) {
  const { client, server } = pair(piece);
  listen(server, serve);
  return { mux: await MuxClient.connect(client), client, server };
}

const until = async (ok: () => boolean) => {
  for (const t0 = Date.now(); !ok(); await new Promise((r) => setTimeout(r, 1))) {
    if (Date.now() - t0 > 2_000) throw new Error("not reached");
  }
};

describe("fast seam: streams on one connection", () => {
  it("carries frames both ways in order, on streams side by side, whatever the bytes' cuts", async () => {
    const { serve } = echo();
    const { mux } = await connected(serve);
    const links = [mux.dial(), mux.dial(), mux.dial()];
    const inboxes = links.map((l) => new Inbox(l.replies));
    const sent: SeamFrame[][] = [[], [], []];
    for (let i = 1; i <= 40; i++) {
      for (const [k, l] of links.entries()) {
        // hidden states from 1 to ~64 KB: many pieces each
        const f = frame(i, 1 + ((i * 977 * (k + 1)) % 16_000));
        sent[k].push(f);
        expect(l.send(f)).toBe(true);
      }
    }
    for (const [k, inbox] of inboxes.entries()) {
      await inbox.until((f) => f.stepId === 40n);
      expect(inbox.items.length).toBe(40);
      inbox.items.forEach((f, i) => expect(equals(SeamFrameSchema, f, sent[k][i])).toBe(true));
      expect(links[k].transport).toBe("tcp");
    }
  });

  it("a stream ended by the dialer ends on the server; one torn down fails there as unavailable", async () => {
    const { serve, ends } = echo();
    const { mux } = await connected(serve);
    const closed = mux.dial();
    closed.send(frame(1));
    const closedReplies = new Inbox(closed.replies);
    await closedReplies.until(() => true);
    closed.close();
    expect(closed.send(frame(2))).toBe(false);
    await closedReplies.done;
    expect(closedReplies.error).toBeUndefined();
    const torn = mux.dial();
    torn.send(frame(1));
    const tornReplies = new Inbox(torn.replies);
    await tornReplies.until(() => true);
    torn.abort("left for a repair");
    await until(() => ends.length === 2);
    // unavailable: the node parks a session whose driver went away (a repair may resume it)
    expect(ends).toEqual(["end", "unavailable: left for a repair"]);
  });

  it("bytes that are no frame fail their stream only; the others go on", async () => {
    const { serve, ends } = echo();
    const { mux, client } = await connected(serve);
    const good = mux.dial();
    const goodReplies = new Inbox(good.replies);
    const bad = mux.dial(); // channel 2
    bad.send(frame(1));
    // a DATA message on channel 2 whose body is not a seam frame
    const junk = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x0f);
    const head = new Uint8Array(9);
    new DataView(head.buffer).setUint32(0, junk.length, true);
    new DataView(head.buffer).setUint32(4, 2, true);
    head[8] = 1;
    client.write([head, junk]);
    await until(() => ends.length === 1);
    expect(ends[0]).toMatch(/^malformed: not a seam frame/);
    good.send(frame(7));
    expect((await goodReplies.until(() => true)).stepId).toBe(7n);
  });

  it("a frame past the limit is refused by its header: skipped unread, its stream fails too_large", async () => {
    const { serve, ends } = echo();
    // large pieces: 64 MiB of skipped bytes go by quickly
    const { mux, client } = await connected(serve, () => 1 << 20);
    const big = mux.dial(); // channel 1
    const head = new Uint8Array(9);
    const size = MAX_FRAME_BYTES + 1;
    new DataView(head.buffer).setUint32(0, size, true);
    new DataView(head.buffer).setUint32(4, 1, true);
    head[8] = 1;
    client.write([head, new Uint8Array(size)]);
    await until(() => ends.length === 1);
    expect(ends[0]).toBe(`too_large: a frame of ${size} bytes exceeds ${MAX_FRAME_BYTES}`);
    expect(big.send(frame(1))).toBe(true); // its channel is gone on the server: ignored there
    const after = mux.dial();
    const replies = new Inbox(after.replies);
    after.send(frame(3));
    expect((await replies.until(() => true)).stepId).toBe(3n);
  });

  it("one peer's connection holds at most its streams, and its bytes waiting are not read past a bound", async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const taken: bigint[] = [];
    // a node busy elsewhere: it takes nothing until released
    const serve: SeamServe = async (frames, reply) => {
      await released;
      for await (const f of frames) {
        taken.push(f.stepId);
        reply(f);
      }
    };
    const { client, server } = pair();
    const reads: string[] = [];
    server.pause = () => reads.push("pause");
    server.resume = () => reads.push("resume");
    listen(server, serve, { channels: 2, queuedBytes: 20_000 });
    const mux = await MuxClient.connect(client);
    const [a, b, c] = [mux.dial(), mux.dial(), mux.dial()];
    // the third stream is refused at once, the first two stay open
    await expect(new Inbox(c.replies).until(() => false)).rejects.toThrow(
      /resource_exhausted: 2 streams are open/,
    );
    // ~4 KB frames: the sixth passes 20 KB waiting, and reading stops
    for (let i = 1; i <= 8; i++) a.send(frame(i, 1000));
    await until(() => reads.length > 0);
    expect(reads).toEqual(["pause"]);
    // the node takes them: reading goes on, and every frame arrives in order
    release();
    await until(() => taken.length === 8);
    expect(reads).toEqual(["pause", "resume"]);
    expect(taken).toEqual([1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n]);
    b.close();
    a.close();
  });

  it("a lost connection fails every stream on both sides with unavailable", async () => {
    const { serve, ends } = echo();
    const { mux, client } = await connected(serve);
    const links = [mux.dial(), mux.dial()];
    const inboxes = links.map((l) => new Inbox(l.replies));
    for (const l of links) l.send(frame(1));
    await Promise.all(inboxes.map((i) => i.until(() => true)));
    client.peer.close(); // the server's side goes away
    await Promise.all(inboxes.map((i) => i.done));
    for (const i of inboxes) expect(i.error).toMatchObject({ code: "unavailable" });
    await until(() => ends.length === 2);
    expect(ends.every((e) => e.startsWith("unavailable: the fast seam connection closed"))).toBe(true);
    expect(mux.closed).toBe(true);
    expect(() => mux.dial()).toThrow(SeamError);
  });

  it("connect is refused by a peer that answers another protocol, or says nothing", async () => {
    const other = pair();
    other.server.onData(() =>
      other.server.write([new TextEncoder().encode("HTTP/1.1 400 Bad Request\r\n\r\n")])
    );
    await expect(MuxClient.connect(other.client)).rejects.toThrow(/another protocol answered/);
    const silent = pair();
    await expect(MuxClient.connect(silent.client, { timeoutMs: 20 })).rejects.toThrow(/no answer/);
    expect(FAST_ACCEPT.length).toBeGreaterThan(0);
  });
});

describe("deferred link", () => {
  it("queues frames until its link is chosen, then sends them in order; a close waits for it", async () => {
    const sent: SeamFrame[] = [];
    let closed = false;
    let choose!: (l: SeamLink) => void;
    const link = deferredLink(new Promise((r) => (choose = r)), "grpc");
    expect(link.transport).toBe("grpc");
    link.send(frame(1));
    link.send(frame(2));
    link.close();
    expect(link.send(frame(3))).toBe(false);
    choose({
      transport: "tcp",
      send: (f) => (sent.push(f), true),
      replies: (async function* () {})(),
      close: () => (closed = true),
      abort: () => {},
    });
    await until(() => closed);
    expect(sent.map((f) => f.stepId)).toEqual([1n, 2n]);
    expect(link.transport).toBe("tcp");
  });
});

describe("fast seam on a seam server's port", () => {
  const servers: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  const info = () => Promise.resolve(create(NodeInfoSchema, { node: "n" }));
  const served: string[] = [];
  const serve: SeamServe = async (frames, reply, transport) => {
    served.push(transport ?? "?");
    for await (const f of frames) reply(f);
  };

  async function roundTrip(link: SeamLink, n: number) {
    const replies = new Inbox(link.replies);
    for (let i = 1; i <= n; i++) link.send(frame(i, 576));
    await replies.until((f) => f.stepId === BigInt(n));
    link.close();
    return replies.items.map((f) => Number(f.stepId));
  }

  it("a node that speaks it gets the fast seam; gRPC still answers on the same port", async () => {
    const server = await serveSeams(serve, info, "127.0.0.1", 0, true);
    servers.push(server);
    const grpc = new GrpcSeams();
    const fast = new FastSeams((u) => grpc.dial(u));
    try {
      const first = fast.dial(server.url);
      expect(await roundTrip(first, 5)).toEqual([1, 2, 3, 4, 5]);
      expect(first.transport).toBe("tcp");
      // the next stream shares the connection and starts at once
      const second = fast.dial(server.url);
      expect(second.transport).toBe("tcp");
      expect(await roundTrip(second, 3)).toEqual([1, 2, 3]);
      expect((await grpc.info(server.url)).node).toBe("n");
      expect(await roundTrip(grpc.dial(server.url), 2)).toEqual([1, 2]);
      expect(served).toEqual(["tcp", "tcp", "grpc"]);
    } finally {
      fast.close();
      grpc.close();
    }
  });

  it("a node that does not falls back to gRPC, frames sent before the answer included", async () => {
    served.length = 0;
    const server = await serveSeams(serve, info, "127.0.0.1", 0, false);
    servers.push(server);
    const grpc = new GrpcSeams();
    const fast = new FastSeams((u) => grpc.dial(u));
    try {
      const link = fast.dial(server.url);
      expect(await roundTrip(link, 4)).toEqual([1, 2, 3, 4]);
      expect(link.transport).toBe("grpc");
      expect(served).toEqual(["grpc"]);
    } finally {
      fast.close();
      grpc.close();
    }
  });

  it("holds what a body's bytes took, not what its header announced", () => {
    const got: number[] = [];
    const reader = new MessageReader((_, __, body) => got.push(body.length), () => {});
    const head = (len: number) => {
      const h = new Uint8Array(9);
      new DataView(h.buffer).setUint32(0, len, true);
      h[8] = 1;
      return h;
    };
    // 64 MB announced, 10 bytes sent: 10 bytes held
    reader.push(head(MAX_FRAME_BYTES));
    reader.push(new Uint8Array(10));
    expect(reader.held).toBe(10);
    // a body of 300 KB in uneven pieces (small ones copied, large ones viewed) arrives whole,
    // in order
    let whole: Uint8Array | undefined;
    const r2 = new MessageReader((_, __, body) => (whole = body), () => {});
    const body = Uint8Array.from({ length: 300_000 }, (_, i) => (i * 7) & 255);
    r2.push(head(body.length));
    // a slab's reads follow each other in memory: they join into one view
    const slab = body.slice(0, 100_000);
    for (let at = 0; at < slab.length; at += 25_000) r2.push(slab.subarray(at, at + 25_000));
    for (let sent = 100_000, i = 0; sent < body.length; i++) {
      const n = Math.min(i % 2 ? 7_001 : 301, body.length - sent);
      r2.push(body.slice(sent, sent + n));
      sent += n;
    }
    expect(whole).toEqual(body);
    expect(r2.held).toBe(0);
  });

  it("says a read buffer may be written again only once nothing it handed on or holds views it", () => {
    const bodies: Uint8Array[] = [];
    const reader = new MessageReader((_, __, body) => bodies.push(body), () => {});
    const message = (len: number) => {
      const m = new Uint8Array(9 + len);
      new DataView(m.buffer).setUint32(0, len, true);
      m[8] = 1;
      return m;
    };
    // a whole small message in a slab is handed on as a view of it: that slab is never free
    const a = new Uint8Array(64);
    a.set(message(20));
    reader.push(a.subarray(0, 29));
    expect(bodies[0].buffer).toBe(a.buffer);
    expect(reader.reusable(a.buffer)).toBe(false);
    // a large body spanning two slabs: each held while it is under way, free once it is
    // copied out (and its bytes stay the copy's when the slabs are written again)
    const big = message(200_000);
    big.fill(7, 9);
    const [b, c] = [new Uint8Array(150_000), new Uint8Array(150_000)];
    b.set(big.subarray(0, 100_000));
    c.set(big.subarray(100_000));
    reader.push(b.subarray(0, 100_000));
    expect(reader.reusable(b.buffer)).toBe(false);
    reader.push(c.subarray(0, big.length - 100_000));
    expect(bodies[1].length).toBe(200_000);
    expect(reader.reusable(b.buffer)).toBe(true);
    expect(reader.reusable(c.buffer)).toBe(true);
    b.fill(0);
    c.fill(0);
    expect(bodies[1].every((x) => x === 7)).toBe(true);
  });
});
