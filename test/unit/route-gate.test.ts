// The gateway's way to a route: busy routes and a moment with no complete route at all (a node
// moving between ranges) are waited out in the request queue; a network without one says so.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RouteResponseSchema, RouteSchema } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { RouteGate } from "../../server/gateway/route-gate.ts";

const NO_ROUTE = new ConnectError("no complete route of admitted, live nodes", Code.Unavailable);

/** A tracker whose route call fails with `fail` until `okAfter` calls, then hands a route. */
function tracker(fail: ConnectError, okAfter: number) {
  let calls = 0;
  return {
    calls: () => calls,
    client: {
      route: () => {
        calls++;
        if (calls <= okAfter) return Promise.reject(fail);
        return Promise.resolve(
          create(RouteResponseSchema, { routes: [create(RouteSchema, { epoch: 1n, name: "r" })] }),
        );
      },
      done: () => Promise.resolve({}),
    },
  };
}

const gate = (t: ReturnType<typeof tracker>) =>
  // deno-lint-ignore no-explicit-any
  new RouteGate(t.client as any, new Uint8Array(32), { maxWaiting: 8, timeoutMs: 5_000, pollMs: 20 });

describe("route gate", () => {
  it("waits out a moment without any complete route, then gets its route", async () => {
    const t = tracker(NO_ROUTE, 3);
    const lease = await gate(t).acquire("k", new AbortController().signal);
    expect(lease.route.name).toBe("r");
    expect(t.calls()).toBe(4);
    await lease.end();
  });

  it("past the coverage wait, no complete route is the answer", async () => {
    const t = tracker(NO_ROUTE, Infinity);
    const at = performance.now();
    await expect(gate(t).acquire("k", new AbortController().signal, undefined, [], 200)).rejects.toBe(
      NO_ROUTE,
    );
    expect(performance.now() - at).toBeGreaterThanOrEqual(200);
    expect(t.calls()).toBeGreaterThan(1);
  });

  it("a tracker that refuses otherwise is the answer at once", async () => {
    const bad = new ConnectError("unknown model artifact", Code.NotFound);
    const t = tracker(bad, Infinity);
    await expect(gate(t).acquire("k", new AbortController().signal)).rejects.toBe(bad);
    expect(t.calls()).toBe(1);
  });
});
