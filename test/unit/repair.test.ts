import { describe, expect, it } from "vitest";
import { blamedHops, repairable } from "../../src/gateway/repair.ts";
import { SeamError } from "../../src/seam/errors.ts";

const hops = [
  { node: "a", url: "http://127.0.0.1:4001" },
  { node: "b", url: "relay+ws://127.0.0.1:9000/peer-b" },
];

describe("route repair", () => {
  it("blames the hops a failure names by URL, not a URL that merely starts the same", () => {
    expect(blamedHops("the seam to the first shard http://127.0.0.1:4001 has ended", hops)).toEqual(["a"]);
    expect(blamedHops("next shard relay+ws://127.0.0.1:9000/peer-b: peer gone", hops)).toEqual(["b"]);
    // port 40012 is another node; peer-b2 another peer
    expect(blamedHops("cannot reach http://127.0.0.1:40012: refused", hops)).toEqual([]);
    expect(blamedHops("next shard relay+ws://127.0.0.1:9000/peer-b2 left", hops)).toEqual([]);
    expect(blamedHops("no reply to step 7 within 120000 ms", hops)).toEqual([]);
  });

  it("repairs what another route can get past, not what would fail there too", () => {
    for (const code of ["unavailable", "deadline", "stream_failed", "expired", "unknown_session"] as const) {
      expect(repairable(new SeamError(code, "x"))).toBe(true);
    }
    for (
      const code of ["malformed", "cancelled", "context_full", "unauthenticated", "wrong_shard"] as const
    ) {
      expect(repairable(new SeamError(code, "x"))).toBe(false);
    }
    expect(repairable(new Error("unavailable"))).toBe(false);
  });
});
