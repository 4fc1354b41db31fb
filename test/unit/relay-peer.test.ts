import { toBinary } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Kind } from "../../src/gen/strata/relay/v1/relay_pb.ts";
import { type SeamFrame, SeamFrameSchema } from "../../src/gen/strata/seam/v1/seam_pb.ts";
import { ShardNode } from "../../src/node/shard-node.ts";
import { replyTo } from "../../src/node/replies.ts";
import { decodeEnvelope, encodeEnvelope } from "../../src/relay/envelope.ts";
import { RelayPeer } from "../../src/relay/peer.ts";
import { relayPieceFetch } from "../../src/relay/piece-fetch.ts";
import { parseHopUrl, relayHopUrl } from "../../src/route/hop-url.ts";
import { RouteSession } from "../../src/route/route-session.ts";
import { encodeFrame } from "../../src/seam/frame.ts";
import type { SeamServe } from "../../src/seam/link.ts";
import { expectedToken, FakeEngine } from "../fakes/fake-engine.ts";
import { tokenStep } from "../fakes/frames.ts";
import { Inbox } from "../fakes/inbox.ts";
import { MemoryRelay, type MemorySocket } from "../fakes/memory-relay.ts";
import { ARTIFACT, routeKey, signedHops } from "../fakes/route-keys.ts";

// millisecond tests: one that waits this long is stuck (the config's limit is for integration runs)
vi.setConfig({ testTimeout: 5_000 });

const created: ShardNode[] = [];
afterEach(async () => {
  await Promise.all(created.splice(0).map((n) => n.close()));
});

/** A frame the way a driver would send it (any well-formed one does here). */
const step = (stepId: bigint, sessionId = "s") =>
  tokenStep({ sessionId, range: { start: 0, end: 4 } }, { stepId, start: Number(stepId) - 1, tokens: [1] });

/** A server that answers every frame at once and keeps what it got. */
function echo() {
  const serve: SeamServe = async (frames, reply) => {
    try {
      for await (const f of frames) {
        server.got.push(f);
        reply(replyTo(f));
      }
      server.ended = true;
    } catch (e) {
      server.failed = e;
    }
  };
  const server = { serve, got: [] as SeamFrame[], failed: undefined as unknown, ended: false };
  return server;
}

/** Lets the relay's deliveries (microtasks, several hops deep) run. */
const settle = () => new Promise((r) => setTimeout(r, 0));

/** A raw connection to the relay that sees every envelope sent to it. */
function raw(relay: MemoryRelay, name: string) {
  const socket: MemorySocket = relay.connect(name);
  const got: ReturnType<typeof decodeEnvelope>[] = [];
  socket.onMessage((b) => got.push(decodeEnvelope(b)));
  socket.onClose(() => {});
  return { socket, got };
}

function peers(tap?: (bytes: Uint8Array, f: SeamFrame) => void) {
  const relay = new MemoryRelay();
  const head = new RelayPeer(relay.connect("head"), "head", tap);
  const tail = new RelayPeer(relay.connect("tail"), "tail");
  return { relay, head, tail };
}

/** A one-node route's node (layers 0:4) serving the seams other peers open to `tail`. */
async function servedTail(tail: RelayPeer, parkMs = 0) {
  const engine = new FakeEngine({ range: { start: 0, end: 4 } });
  const node = new ShardNode(engine, {
    nodeId: "tail",
    artifactSha256: ARTIFACT,
    routeKey: (await routeKey()).publicKey,
    dial: () => {
      throw new Error("a single-node route dials nobody");
    },
    limits: { maxBatchTokens: 64, maxQueuedPerSession: 8, kvCells: 256 },
    leaseMs: 60_000,
    parkMs,
  });
  created.push(node);
  tail.listen(node.serve);
  return { engine, node };
}

describe("relay peer: streams", () => {
  it("drives a route session to a node behind the relay: same tokens, the frame bytes untouched", async () => {
    const taps: Uint8Array[] = [];
    const { relay, head, tail } = peers((bytes) => taps.push(bytes));
    const { engine } = await servedTail(tail);
    const url = relayHopUrl("ws://relay", "tail");
    const dial = (u: string) => {
      const hop = parseHopUrl(u);
      if (hop.kind !== "relay") throw new Error(`not a relay hop: ${u}`);
      return head.dial(hop.peer);
    };
    const hops = await signedHops([{ url, range: { start: 0, end: 4 } }], "r");
    const s = await RouteSession.open(dial, hops, {
      sessionId: "r",
      epoch: 1n,
      artifactSha256: ARTIFACT,
      kvCells: 32,
    });
    const tokens: number[] = [];
    for await (const r of s.generate(Int32Array.of(2, 7), 3, () => false)) tokens.push(r.token);
    await s.release();
    const t1 = expectedToken(7, 1), t2 = expectedToken(t1, 2);
    expect(tokens).toEqual([t1, t2, expectedToken(t2, 3)]);
    expect(engine.openSequences).toBe(0);
    // what the tail received is byte for byte what the head's tap saw sent
    const toTail = relay.forwarded.filter((e) => e.header.to === "tail" && e.header.kind === Kind.DATA);
    expect(toTail.map((e) => [...e.payload])).toEqual(taps.map((b) => [...b]));
    expect(toTail.every((e) => e.header.from === "head")).toBe(true);
  });

  it("close ends the stream after the frames sent; the server's end closes the replies", async () => {
    const { head, tail } = peers();
    const server = echo();
    tail.listen(server.serve);
    const link = head.dial("tail");
    const replies = new Inbox(link.replies);
    link.send(step(1n));
    link.send(step(2n));
    link.close();
    await replies.done;
    expect(replies.error).toBeUndefined();
    expect(replies.items.map((r) => r.stepId)).toEqual([1n, 2n]);
    expect(server.got.map((f) => f.stepId)).toEqual([1n, 2n]);
    expect(server.ended).toBe(true);
  });

  it("abort tells the other side why: its frames fail with unavailable; this side's replies just end", async () => {
    const { head, tail } = peers();
    const server = echo();
    tail.listen(server.serve);
    const link = head.dial("tail");
    const replies = new Inbox(link.replies);
    link.send(step(1n));
    await replies.count(1);
    link.abort("deadline passed");
    await replies.done;
    await settle();
    expect(replies.error).toBeUndefined();
    expect(server.failed).toMatchObject({ code: "unavailable", message: "deadline passed" });
    expect(link.send(step(2n))).toBe(false);
  });

  it("fails a stream to a peer that is not on the relay, or serves no seams, with unavailable", async () => {
    const { relay, head } = peers();
    const ghost = new Inbox(head.dial("ghost").replies);
    await ghost.done;
    expect(ghost.error).toMatchObject({
      code: "unavailable",
      message: "peer ghost is not connected to this relay",
    });
    new RelayPeer(relay.connect("mute"), "mute"); // connected, listening to nothing
    const mute = new Inbox(head.dial("mute").replies);
    await mute.done;
    expect(mute.error).toMatchObject({ code: "unavailable", message: "mute serves no seams" });
  });

  it("takes replies on a stream only from the peer it was opened to", async () => {
    const { relay, head, tail } = peers();
    const server = echo();
    tail.listen(server.serve);
    const link = head.dial("tail");
    const replies = new Inbox(link.replies);
    link.send(step(1n));
    await replies.count(1);
    // another peer answers on the same channel name: the relay stamps its own name, the head ignores it
    const intruder = raw(relay, "intruder");
    intruder.socket.send(
      encodeEnvelope({ to: "head", channel: "head-1", kind: Kind.DATA }, encodeFrame(step(9n))),
    );
    intruder.socket.send(encodeEnvelope({ to: "head", channel: "head-1", kind: Kind.CLOSE }));
    await settle();
    link.send(step(2n));
    await replies.count(2);
    expect(replies.items.map((r) => r.stepId)).toEqual([1n, 2n]);
    expect(replies.ended).toBe(false);
  });
});

describe("relay peer: bad input", () => {
  it("ends a stream whose bytes are no frame, with the reason, and only that stream", async () => {
    const { relay, head, tail } = peers();
    const server = echo();
    tail.listen(server.serve);
    const good = head.dial("tail");
    const goodReplies = new Inbox(good.replies);
    const bad = raw(relay, "bad");
    bad.socket.send(encodeEnvelope({ to: "tail", channel: "c1", kind: Kind.OPEN }));
    const bytes = encodeFrame(step(1n));
    bad.socket.send(
      encodeEnvelope({ to: "tail", channel: "c1", kind: Kind.DATA }, bytes.subarray(0, bytes.length - 3)),
    );
    await settle();
    expect(bad.got.map((e) => [e.header.kind, e.header.from, e.header.channel])).toEqual([[
      Kind.ERROR,
      "tail",
      "c1",
    ]]);
    expect(bad.got[0].header.error).toMatch(/^not a seam frame/);
    // the channel is gone: a later frame on it is dropped, the other stream goes on
    bad.socket.send(encodeEnvelope({ to: "tail", channel: "c1", kind: Kind.DATA }, bytes));
    good.send(step(1n));
    await goodReplies.count(1);
    expect(server.got).toHaveLength(1);
    expect(bad.got).toHaveLength(1);
  });

  it("ends the stream on a frame that decodes but fails the frame checks (a direct seam refuses it alone)", async () => {
    const { relay, tail } = peers();
    tail.listen(echo().serve);
    const bad = raw(relay, "bad");
    bad.socket.send(encodeEnvelope({ to: "tail", channel: "c1", kind: Kind.OPEN }));
    const foreign = step(1n);
    foreign.schemaVersion = 2;
    bad.socket.send(
      encodeEnvelope({ to: "tail", channel: "c1", kind: Kind.DATA }, toBinary(SeamFrameSchema, foreign)),
    );
    await settle();
    expect(bad.got.map((e) => [e.header.kind, e.header.error])).toEqual([
      [Kind.ERROR, "schema version 2; this peer speaks 1"],
    ]);
  });

  it("refuses a second OPEN of a channel, and ignores envelopes it cannot read", async () => {
    const { relay, tail } = peers();
    const server = echo();
    tail.listen(server.serve);
    const other = raw(relay, "other");
    other.socket.send(encodeEnvelope({ to: "tail", channel: "c1", kind: Kind.OPEN }));
    other.socket.send(encodeEnvelope({ to: "tail", channel: "c1", kind: Kind.OPEN }));
    // straight into the tail's socket, as if the relay had passed them on
    (tail.socket as MemorySocket).deliver(new Uint8Array([1, 2]));
    (tail.socket as MemorySocket).deliver(new Uint8Array([255, 255, 255, 255, 0]));
    other.socket.send(encodeEnvelope({ to: "tail", channel: "c1", kind: Kind.DATA }, encodeFrame(step(1n))));
    await settle();
    expect(other.got.map((e) => [e.header.kind, e.header.error])).toEqual([
      [Kind.ERROR, "channel c1 is already open"],
      [Kind.DATA, ""],
    ]);
    expect(server.got.map((f) => f.stepId)).toEqual([1n]);
  });
});

describe("relay peer: peers that go away", () => {
  it("a peer that leaves the relay fails the streams it was part of, on the other side", async () => {
    const { head, tail } = peers();
    const server = echo();
    tail.listen(server.serve);
    const link = head.dial("tail");
    const replies = new Inbox(link.replies);
    link.send(step(1n));
    await replies.count(1);
    (tail.socket as MemorySocket).drop();
    await replies.done;
    expect(replies.error).toMatchObject({ code: "unavailable", message: "peer tail left the relay" });
    // and the other way round: the tail serving, the dialing head gone
    const again = peers();
    const served = echo();
    again.tail.listen(served.serve);
    const l2 = again.head.dial("tail");
    l2.send(step(1n));
    await new Inbox(l2.replies).count(1);
    (again.head.socket as MemorySocket).drop();
    await settle();
    expect(served.failed).toMatchObject({ code: "unavailable", message: "peer head left the relay" });
  });

  it("when its own connection closes, every stream fails, sends are refused and dialing throws", async () => {
    const { head, tail } = peers();
    const server = echo();
    tail.listen(server.serve);
    const link = head.dial("tail");
    const replies = new Inbox(link.replies);
    link.send(step(1n));
    await replies.count(1);
    (head.socket as MemorySocket).drop("1006 connection lost");
    await replies.done;
    expect(replies.error).toMatchObject({
      code: "unavailable",
      message: "relay connection closed: 1006 connection lost",
    });
    expect(link.send(step(2n))).toBe(false);
    expect(() => head.dial("tail")).toThrow(expect.objectContaining({ code: "unavailable" }));
    await settle();
    expect(server.failed).toMatchObject({ code: "unavailable" });
  });

  it("with redial, a dropped connection comes back under the same name and serves new streams", async () => {
    const relay = new MemoryRelay();
    const changes: string[] = [];
    const tab = new RelayPeer(relay.connect("tab"), "tab", undefined, {
      connect: () => Promise.resolve(relay.connect("tab")),
      onChange: (state) => changes.push(state),
      firstWaitMs: 1,
    });
    const server = echo();
    tab.listen(server.serve);
    const driver = new RelayPeer(relay.connect("driver"), "driver");
    const first = driver.dial("tab");
    const replies = new Inbox(first.replies);
    first.send(step(1n));
    await replies.count(1);
    (tab.socket as MemorySocket).drop("1006 connection lost");
    // the stream open at the drop fails, and the tab refuses to dial while it is down
    await replies.done;
    expect(replies.error).toMatchObject({ code: "unavailable" });
    expect(() => tab.dial("driver")).toThrow(expect.objectContaining({ code: "unavailable" }));
    await vi.waitFor(() => expect(changes).toEqual(["down", "up"]));
    const second = driver.dial("tab");
    second.send(step(2n));
    const again = new Inbox(second.replies);
    await again.count(1);
    expect(again.items[0].stepId).toBe(2n);
    tab.close();
    driver.close();
  });

  it("close() on the peer fails its own streams and leaves the relay", async () => {
    const { relay, head, tail } = peers();
    tail.listen(echo().serve);
    const replies = new Inbox(head.dial("tail").replies);
    head.close();
    await replies.done;
    expect(replies.error).toMatchObject({ code: "unavailable", message: "closed by this peer" });
    await settle();
    expect(relay.peers).toEqual(["tail"]);
  });

  // SeamLink says send() is false once the link has ended, and the gRPC link refuses frames after
  // close(); a relay link once took them and sent DATA behind its own CLOSE
  it("refuses to send after close, as a gRPC link does", async () => {
    const { relay, head, tail } = peers();
    tail.listen(echo().serve);
    const link = head.dial("tail");
    link.close();
    const accepted = link.send(step(1n));
    await settle();
    const sent = relay.forwarded.filter((e) => e.header.from === "head").map((e) => e.header.kind);
    expect([accepted, sent]).toEqual([false, [Kind.OPEN, Kind.CLOSE]]);
  });
});

describe("relay peer and a shard node", () => {
  it("a stream that fails under a node frees the session it carried", async () => {
    const { head, tail } = peers();
    const { engine, node } = await servedTail(tail);
    const [hop] = await signedHops([{ url: "relay+ws://r/tail", range: { start: 0, end: 4 } }], "x");
    const s = await RouteSession.open(() => head.dial("tail"), [hop], {
      sessionId: "x",
      epoch: 1n,
      artifactSha256: ARTIFACT,
      kvCells: 32,
    });
    await s.prefill(Int32Array.of(1, 2, 3));
    expect([engine.cellsUsed, node.sessionIds()]).toEqual([3, ["x"]]);
    (head.socket as MemorySocket).drop();
    await settle();
    expect([engine.cellsUsed, engine.openSequences, node.sessionIds()]).toEqual([0, 0, []]);
    await expect(s.decode(4)).rejects.toMatchObject({ code: "unavailable" });
  });

  it("a session whose driver repairs routes is parked when its peer leaves the relay", async () => {
    const { head, tail } = peers();
    const { engine, node } = await servedTail(tail, 5_000);
    const [hop] = await signedHops([{ url: "relay+ws://r/tail", range: { start: 0, end: 4 } }], "x");
    const s = await RouteSession.open(() => head.dial("tail"), [hop], {
      sessionId: "x",
      epoch: 1n,
      artifactSha256: ARTIFACT,
      kvCells: 32,
      parkOnLoss: true,
    });
    await s.prefill(Int32Array.of(1, 2, 3));
    (head.socket as MemorySocket).drop();
    await settle();
    // the relay said the peer left: the KV waits for a repair's resuming OPEN
    expect([engine.cellsUsed, node.sessionIds()]).toEqual([3, ["x"]]);
  });
});

describe("relay peer: artifact pieces", () => {
  const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);

  it("gets a piece from the peer that holds it; refuses what it does not hold; fails when the holder is gone", async () => {
    const relay = new MemoryRelay();
    const holder = new RelayPeer(relay.connect("tab-a"), "tab-a");
    const asker = new RelayPeer(relay.connect("tab-b"), "tab-b");
    const piece = bytes(4096, 7);
    holder.servePieces((offset, size) =>
      Promise.resolve(offset === 1000 && size === 4096 ? piece : undefined)
    );
    expect(await asker.getPiece("tab-a", 1000, 4096)).toEqual(piece);
    await expect(asker.getPiece("tab-a", 2000, 16)).rejects.toThrow("tab-a holds no piece at 2000");
    await expect(asker.getPiece("nobody", 0, 1)).rejects.toThrow("not connected");
    // a peer that serves no pieces says so
    await expect(holder.getPiece("tab-b", 0, 1)).rejects.toThrow("tab-b serves no pieces");
    const pending = asker.getPiece("tab-a", 1000, 4096, 60_000);
    asker.close();
    await expect(pending).rejects.toThrow();
  });

  it("through a fetch a downloader uses: a relay hop URL's Range GET is a piece request", async () => {
    const relay = new MemoryRelay();
    const holder = new RelayPeer(relay.connect("tab-a"), "tab-a");
    const asker = new RelayPeer(relay.connect("tab-b"), "tab-b");
    const piece = bytes(100, 3);
    holder.servePieces((offset, size) => Promise.resolve(offset === 50 && size === 100 ? piece : undefined));
    const plain = (() => Promise.resolve(new Response("plain", { status: 200 }))) as typeof fetch;
    const f = relayPieceFetch(asker, "ws://relay:1", plain);
    const got = await f(relayHopUrl("ws://relay:1", "tab-a"), { headers: { range: "bytes=50-149" } });
    expect(got.status).toBe(206);
    expect(new Uint8Array(await got.arrayBuffer())).toEqual(piece);
    expect((await f(relayHopUrl("ws://relay:1", "tab-a"), { headers: { range: "bytes=0-9" } })).status).toBe(
      502,
    );
    expect((await f(relayHopUrl("ws://other:2", "tab-a"), { headers: { range: "bytes=50-149" } })).status)
      .toBe(502);
    expect((await f("http://gateway/artifacts/x")).status).toBe(200);
  });
});
