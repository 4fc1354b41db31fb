import { describe, expect, it } from "vitest";
import { Kind } from "../../src/gen/strata/relay/v1/relay_pb.ts";
import { decodeEnvelope, encodeEnvelope, type Envelope } from "../../src/relay/envelope.ts";
import { admittedPeer, type HubSocket, MAX_CHANNELS_PER_PEER, RelayHub } from "../../src/relay/hub.ts";
import { peerToken } from "../../src/relay/token.ts";

// The relay's routing itself (the hub the WebSocket server runs), driven synchronously through
// sockets that keep what the hub did to them.

/** A peer's connection as the hub sees it: what was sent, whether it was paused or closed. */
class Socket implements HubSocket {
  readonly got: Envelope[] = [];
  readonly sizes: number[] = [];
  /** `written` callbacks of sends the network has not taken yet */
  readonly unwritten: (() => void)[] = [];
  paused = false;
  closed?: string;
  send(bytes: Uint8Array, written?: () => void): void {
    this.got.push(decodeEnvelope(bytes));
    this.sizes.push(bytes.length);
    if (written) this.unwritten.push(written);
  }
  close(code: number, reason: string): void {
    this.closed = `${code} ${reason}`;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  /** The network takes the oldest `n` sends. */
  write(n = this.unwritten.length): void {
    for (const w of this.unwritten.splice(0, n)) w();
  }
}

function hub(highWaterBytes?: number) {
  const h = new RelayHub<Socket>(highWaterBytes);
  const join = (name: string) => {
    const socket = new Socket();
    const conn = h.join(name, socket);
    const send = (to: string, channel: string, kind: Kind, payload?: Uint8Array, error = "") =>
      conn.receive(encodeEnvelope({ to, channel, kind, error }, payload));
    return { socket, conn, send };
  };
  return { hub: h, join };
}

const headers = (s: Socket) =>
  s.got.map(({ header: h }) => ({
    to: h.to,
    from: h.from,
    channel: h.channel,
    kind: h.kind,
    error: h.error,
  }));

describe("relay hub: forwarding", () => {
  it("forwards to the peer named, stamped with the sender's name, the payload untouched", () => {
    const { hub: h, join } = hub();
    const head = join("head"), tail = join("tail");
    const payload = Uint8Array.from({ length: 300 }, (_, i) => i & 0xff);
    // a sender cannot speak as another: `from` is the name its token proved
    head.conn.receive(
      encodeEnvelope({ to: "tail", from: "mallory", channel: "c1", kind: Kind.OPEN }),
    );
    head.send("tail", "c1", Kind.DATA, payload);
    tail.send("head", "c1", Kind.DATA, payload.subarray(0, 10));
    expect(headers(tail.socket)).toEqual([
      { to: "tail", from: "head", channel: "c1", kind: Kind.OPEN, error: "" },
      { to: "tail", from: "head", channel: "c1", kind: Kind.DATA, error: "" },
    ]);
    expect([...tail.socket.got[1].payload]).toEqual([...payload]);
    expect(headers(head.socket)).toEqual([{
      to: "head",
      from: "tail",
      channel: "c1",
      kind: Kind.DATA,
      error: "",
    }]);
    const sent = [...tail.socket.sizes, ...head.socket.sizes];
    expect(h.stats()).toEqual({
      peers: ["head", "tail"],
      channels: 1,
      messages: 3,
      bytes: sent.reduce((a, b) => a + b),
      dropped: 0,
      pauses: 0,
      refused: 0,
    });
  });

  it("answers an envelope for a peer that is not connected with an ERROR from that name", () => {
    const { hub: h, join } = hub();
    const head = join("head");
    head.send("ghost", "c1", Kind.OPEN);
    expect(headers(head.socket)).toEqual([
      {
        to: "head",
        from: "ghost",
        channel: "c1",
        kind: Kind.ERROR,
        error: "peer ghost is not connected to this relay",
      },
    ]);
    expect(h.stats()).toMatchObject({ channels: 0, messages: 0, dropped: 0 });
  });

  it("drops, and counts, what it cannot route: not binary, no envelope, no kind, no channel", () => {
    const { hub: h, join } = hub();
    const head = join("head"), tail = join("tail");
    head.conn.drop(); // a text message
    head.conn.receive(new Uint8Array([1, 2, 3]));
    const long = new Uint8Array(4 + 4097);
    new DataView(long.buffer).setUint32(0, 4097, true); // a header over the 4096 bytes allowed
    head.conn.receive(long);
    head.conn.receive(new Uint8Array([10, 0, 0, 0, 1, 2])); // a header longer than the message
    head.conn.receive(new Uint8Array([3, 0, 0, 0, 0xff, 0xff, 0xff])); // no RelayHeader
    head.send("tail", "c1", Kind.UNSPECIFIED);
    head.send("tail", "", Kind.OPEN);
    expect([head.socket.got, tail.socket.got]).toEqual([[], []]);
    expect(h.stats()).toMatchObject({ dropped: 7, messages: 0, channels: 0 });
  });
});

describe("relay hub: channels and peers that go", () => {
  it("a peer that leaves fails each channel it was part of, on the other side, and only those", () => {
    const { hub: h, join } = hub();
    const head = join("head"), tail = join("tail"), other = join("other");
    head.send("tail", "head-1", Kind.OPEN);
    tail.send("head", "tail-1", Kind.OPEN);
    other.send("tail", "other-1", Kind.OPEN);
    tail.socket.got.length = 0;
    head.conn.closed();
    expect(headers(tail.socket)).toEqual([
      { to: "tail", from: "head", channel: "head-1", kind: Kind.ERROR, error: "peer head left the relay" },
      { to: "tail", from: "head", channel: "tail-1", kind: Kind.ERROR, error: "peer head left the relay" },
    ]);
    expect(h.stats()).toMatchObject({ peers: ["tail", "other"], channels: 1 });
    tail.send("head", "tail-1", Kind.DATA);
    expect(headers(tail.socket)[2]).toMatchObject({
      from: "head",
      kind: Kind.ERROR,
      error: "peer head is not connected to this relay",
    });
  });

  it("forgets a channel once both sides closed it: a peer leaving later fails nothing", () => {
    const { hub: h, join } = hub();
    const head = join("head"), tail = join("tail");
    head.send("tail", "c1", Kind.OPEN);
    head.send("tail", "c1", Kind.CLOSE);
    expect(h.stats().channels).toBe(1); // the tail may still reply
    tail.send("head", "c1", Kind.CLOSE);
    expect(h.stats().channels).toBe(0);
    tail.conn.closed();
    expect(head.socket.got.map((e) => e.header.kind)).toEqual([Kind.CLOSE]);
  });

  it("forgets a channel on an ERROR from either side", () => {
    const { hub: h, join } = hub();
    const head = join("head"), tail = join("tail");
    head.send("tail", "c1", Kind.OPEN);
    head.send("tail", "c1", Kind.ERROR, undefined, "deadline passed");
    head.send("tail", "c2", Kind.OPEN);
    tail.send("head", "c2", Kind.ERROR, undefined, "c2 serves nothing");
    expect(h.stats().channels).toBe(0);
    expect(headers(tail.socket)[1]).toMatchObject({
      from: "head",
      kind: Kind.ERROR,
      error: "deadline passed",
    });
    expect(headers(head.socket)).toEqual([
      { to: "head", from: "tail", channel: "c2", kind: Kind.ERROR, error: "c2 serves nothing" },
    ]);
  });

  it(`refuses an OPEN past ${MAX_CHANNELS_PER_PEER} channels with resource_exhausted; a channel over makes room`, () => {
    const { hub: h, join } = hub();
    const head = join("head"), tail = join("tail");
    for (let i = 0; i < MAX_CHANNELS_PER_PEER; i++) head.send("tail", `c${i}`, Kind.OPEN);
    head.send("tail", "c0", Kind.OPEN); // one already open is not another channel
    head.send("tail", "more", Kind.OPEN);
    expect(headers(head.socket)).toEqual([{
      to: "head",
      from: "tail",
      channel: "more",
      kind: Kind.ERROR,
      error:
        `resource_exhausted: ${MAX_CHANNELS_PER_PEER} channels open through the relay, the most a peer may have`,
    }]);
    expect(h.stats()).toMatchObject({ channels: MAX_CHANNELS_PER_PEER, refused: 1 });
    expect(tail.socket.got).toHaveLength(MAX_CHANNELS_PER_PEER + 1);
    // the limit is the opener's: the tail opens its own
    tail.send("head", "t1", Kind.OPEN);
    expect(headers(head.socket)[1]).toMatchObject({ from: "tail", channel: "t1", kind: Kind.OPEN });
    head.send("tail", "c0", Kind.CLOSE);
    tail.send("head", "c0", Kind.CLOSE);
    head.send("tail", "more", Kind.OPEN);
    expect(headers(tail.socket).at(-1)).toMatchObject({ from: "head", channel: "more", kind: Kind.OPEN });
    expect(h.stats()).toMatchObject({ channels: MAX_CHANNELS_PER_PEER + 1, refused: 1 });
  });

  it("a newer connection under a name closes the older one and takes its messages", () => {
    const { hub: h, join } = hub();
    const head = join("head"), old = join("tail");
    const fresh = join("tail");
    expect([old.socket.closed, fresh.socket.closed]).toEqual([
      "4409 replaced by a newer connection",
      undefined,
    ]);
    head.send("tail", "c1", Kind.OPEN);
    expect([old.socket.got, fresh.socket.got.map((e) => e.header.channel)]).toEqual([[], ["c1"]]);
    // the older connection's close comes after: the name stays connected
    old.conn.closed();
    expect(h.stats().peers).toEqual(["head", "tail"]);
  });
});

describe("relay hub: a slow receiver pauses its senders", () => {
  it("pauses a sender once the bytes toward its receiver pass the high water, resumes it at half", () => {
    const { hub: h, join } = hub(1000);
    const a = join("a"), b = join("b"), slow = join("slow");
    const data = new Uint8Array(300);
    a.send("slow", "a1", Kind.DATA, data);
    a.send("slow", "a1", Kind.DATA, data);
    a.send("slow", "a1", Kind.DATA, data);
    expect(a.socket.paused).toBe(false); // about 930 bytes waiting
    a.send("slow", "a1", Kind.DATA, data);
    b.send("slow", "b1", Kind.DATA, data);
    a.send("slow", "a1", Kind.DATA, data); // paused once, however much it sends
    expect([a.socket.paused, b.socket.paused, h.stats().pauses]).toEqual([true, true, 2]);
    // the network takes the slow peer's bytes: at half the high water its senders go on
    const size = slow.socket.sizes[0];
    slow.socket.write(5 - Math.floor(500 / size));
    expect(a.socket.paused).toBe(true);
    slow.socket.write(1);
    expect([a.socket.paused, b.socket.paused]).toEqual([false, false]);
    // and bytes the hub sends of its own (an ERROR) are not counted as waiting
    a.send("ghost", "g", Kind.OPEN);
    expect(a.socket.unwritten).toEqual([]);
  });

  it("a slow receiver that leaves lets its paused senders go on", () => {
    const { join } = hub(100);
    const a = join("a"), slow = join("slow");
    a.send("slow", "a1", Kind.DATA, new Uint8Array(200));
    expect(a.socket.paused).toBe(true);
    slow.conn.closed();
    expect(a.socket.paused).toBe(false);
  });
});

describe("relay hub: admission", () => {
  it("admits /peer?token=… as the name its token proves, nothing else", async () => {
    const token = await peerToken("s3cret", "tab-1");
    expect(await admittedPeer("s3cret", `/peer?token=${encodeURIComponent(token)}`)).toBe("tab-1");
    const refused = await Promise.all([
      admittedPeer("other", `/peer?token=${token}`), // signed with another secret
      admittedPeer("s3cret", `/peer?token=${token.replace("tab-1", "tab-2")}`), // a name not its own
      admittedPeer("s3cret", `/peer?token=${token.slice(0, -2)}`),
      admittedPeer("s3cret", "/peer"),
      admittedPeer("s3cret", `/health?token=${token}`),
    ]);
    expect(refused).toEqual([undefined, undefined, undefined, undefined, undefined]);
  });
});
