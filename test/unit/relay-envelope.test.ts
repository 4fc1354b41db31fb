import { describe, expect, it } from "vitest";
import { decodeEnvelope, encodeEnvelope } from "../../src/relay/envelope.ts";
import { peerToken, verifyPeerToken } from "../../src/relay/token.ts";
import { Kind } from "../../src/gen/strata/relay/v1/relay_pb.ts";
import { parseHopUrl } from "../../src/route/hop-url.ts";

describe("relay", () => {
  it("envelopes carry the frame bytes untouched and refuse truncation", () => {
    const payload = Uint8Array.from({ length: 300 }, (_, i) => i & 255);
    const env = decodeEnvelope(
      encodeEnvelope({ to: "b", from: "a", channel: "c1", kind: Kind.DATA }, payload),
    );
    expect(env.header.to).toBe("b");
    expect(env.header.kind).toBe(Kind.DATA);
    expect(env.payload).toEqual(payload);
    expect(() => decodeEnvelope(Uint8Array.of(200, 0, 0, 0, 1))).toThrow(/relay header of 200 bytes/);
  });
  it("peer tokens prove their name and nothing else", async () => {
    const t = await peerToken("secret", "node-a");
    expect(await verifyPeerToken("secret", t)).toBe("node-a");
    expect(await verifyPeerToken("other", t)).toBeUndefined();
    expect(await verifyPeerToken("secret", t.replace("node-a", "node-b"))).toBeUndefined();
    expect(await verifyPeerToken("secret", "garbage")).toBeUndefined();
    await expect(peerToken("s", "bad name")).rejects.toThrow(/peer name/);
  });
  it("hop URLs name direct nodes and relay peers", () => {
    expect(parseHopUrl("http://127.0.0.1:7801/")).toEqual({ kind: "direct", url: "http://127.0.0.1:7801" });
    expect(parseHopUrl("relay+ws://h:7700/tail")).toEqual({
      kind: "relay",
      relay: "ws://h:7700",
      peer: "tail",
    });
    expect(() => parseHopUrl("ftp://x")).toThrow(/use http/);
    expect(() => parseHopUrl("relay+ws://h:7700/")).toThrow(/names no relay peer/);
  });
});
