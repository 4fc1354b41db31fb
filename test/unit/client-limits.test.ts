import { addressGroup } from "../../src/gateway/address-group.ts";
import { describe, expect, it } from "vitest";
import { ClientLimits, MAX_CLIENTS, NO_CLIENT_LIMITS } from "../../src/gateway/client-limits.ts";

const limits = (o: Partial<typeof NO_CLIENT_LIMITS>) => {
  const clock = { now: 0 };
  return { l: new ClientLimits({ ...NO_CLIENT_LIMITS, ...o }, () => clock.now), clock };
};

describe("client limits", () => {
  it("admits everything when no limit is set", () => {
    const { l } = limits({});
    for (let i = 0; i < 1000; i++) expect(l.admit("a").ok).toBe(true);
    expect(l.clients).toBe(0);
  });

  it("refuses past the requests a minute, says when to come back, and refills evenly", () => {
    const { l, clock } = limits({ requestsPerMin: 6 });
    for (let i = 0; i < 6; i++) expect(l.admit("a").ok).toBe(true);
    const r = l.admit("a");
    expect(r).toEqual({ ok: false, why: "requests a minute, at most 6", retryAfterS: 10 });
    // another client is not touched by a's count
    expect(l.admit("b").ok).toBe(true);
    clock.now += 10_000;
    expect(l.admit("a").ok).toBe(true);
    expect(l.admit("a").ok).toBe(false);
  });

  it("refuses past the requests at once until one is released", () => {
    const { l } = limits({ concurrent: 2 });
    const a = l.admit("a"), b = l.admit("a");
    expect(a.ok && b.ok).toBe(true);
    expect(l.admit("a")).toMatchObject({ ok: false, why: "requests at once, at most 2" });
    if (a.ok) {
      a.release(0);
      a.release(0); // twice is once
    }
    expect(l.admit("a").ok).toBe(true);
    expect(l.admit("a").ok).toBe(false);
  });

  it("charges tokens when a request ends: one may overdraw, the next waits for the refill", () => {
    const { l, clock } = limits({ tokensPerMin: 600 });
    const first = l.admit("a");
    expect(first.ok).toBe(true);
    if (first.ok) first.release(900);
    // 300 tokens of debt at 10 a second: 31 s until the balance is positive again
    expect(l.admit("a")).toEqual({ ok: false, why: "tokens a minute, at most 600", retryAfterS: 31 });
    clock.now += 31_000;
    expect(l.admit("a").ok).toBe(true);
  });

  it("stays bounded under a flood of new clients", () => {
    const { l } = limits({ requestsPerMin: 1 });
    // (a client with a request in flight is kept: those are bounded by the gateway's queue)
    for (let i = 0; i < MAX_CLIENTS + 500; i++) {
      const r = l.admit(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
      if (r.ok) r.release(0);
    }
    expect(l.clients).toBeLessThanOrEqual(MAX_CLIENTS);
  });
});

describe("address groups", () => {
  it("keys IPv4 by address and IPv6 by its /64, whatever its spelling", () => {
    expect(addressGroup("203.0.113.9")).toBe("203.0.113.9");
    expect(addressGroup("::ffff:203.0.113.9")).toBe("203.0.113.9");
    expect(addressGroup("2001:db8:0:1::5")).toBe("2001:db8:0:1::/64");
    expect(addressGroup("[2001:0db8:0000:0001:ffff:1:2:3]")).toBe("2001:db8:0:1::/64");
    expect(addressGroup("2001:db8:0:1:a:b:c:d%eth0")).toBe("2001:db8:0:1::/64");
    expect(addressGroup("::1")).toBe("0:0:0:0::/64");
    expect(addressGroup("2001:db8::")).toBe("2001:db8:0:0::/64");
    expect(addressGroup("64:ff9b::192.0.2.33")).toBe("64:ff9b:0:0::/64");
    // another /64 is another client; what is no address stays as it came
    expect(addressGroup("2001:db8:0:2::5")).not.toBe(addressGroup("2001:db8:0:1::5"));
    expect(addressGroup("1:2:3")).toBe("1:2:3");
    expect(addressGroup("?")).toBe("?");
  });
});
