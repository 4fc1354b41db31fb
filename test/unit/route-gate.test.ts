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

  it("a repair no route suits yet does not hold back the requests behind it", async () => {
    let calls = 0;
    // no route avoids the repair's lost node yet; any other request gets one
    const client = {
      route: (req: { avoidNodes: string[] }) => {
        calls++;
        if (req.avoidNodes.length) return Promise.reject(NO_ROUTE);
        return Promise.resolve(
          create(RouteResponseSchema, { routes: [create(RouteSchema, { epoch: 1n, name: "r" })] }),
        );
      },
      done: () => Promise.resolve({}),
    };
    // deno-lint-ignore no-explicit-any
    const g = new RouteGate(client as any, new Uint8Array(32), {
      maxWaiting: 8,
      timeoutMs: 5_000,
      pollMs: 20,
    });
    const left = new AbortController();
    const repair = g.acquire("repairs", left.signal, { sessionId: "s", avoid: ["lost"] }, [], 5_000);
    const rejected = expect(repair).rejects.toThrow("went away");
    await new Promise((r) => setTimeout(r, 50));
    expect(g.queue.stats().waiting).toBe(1);
    // behind it in the queue, and served at the next poll
    const lease = await g.acquire("k", new AbortController().signal);
    expect(lease.route.name).toBe("r");
    expect(g.queue.stats().waiting).toBe(1);
    expect(calls).toBeGreaterThan(2);
    left.abort();
    await rejected;
    await lease.end();
  });

  it("a repair stops avoiding a lost node once the tracker lists it back at another range", async () => {
    // n was lost holding 0:3 (it left to reload 3:6); no route avoids it
    let at = { start: 0, end: 3 }, live = false;
    const asked: string[][] = [];
    const client = {
      route: (req: { avoidNodes: string[] }) => {
        asked.push([...req.avoidNodes]);
        if (req.avoidNodes.includes("n")) return Promise.reject(NO_ROUTE);
        return Promise.resolve(
          create(RouteResponseSchema, { routes: [create(RouteSchema, { epoch: 2n, name: "m+n" })] }),
        );
      },
      nodes: () =>
        Promise.resolve({ nodes: [{ node: "n", live, admission: "admitted", shard: { range: at } }] }),
      done: () => Promise.resolve({}),
    };
    // deno-lint-ignore no-explicit-any
    const g = new RouteGate(client as any, new Uint8Array(32), {
      maxWaiting: 8,
      timeoutMs: 5_000,
      pollMs: 20,
    });
    const ask = { sessionId: "s", avoid: ["n", "gone"], lostAt: new Map([["n", "0:3"], ["gone", "3:6"]]) };
    const lease = g.acquire("repairs", new AbortController().signal, ask, [], 5_000);
    await new Promise((r) => setTimeout(r, 60));
    // live again at the same range: still avoided (it may be the one that failed)
    live = true;
    await new Promise((r) => setTimeout(r, 60));
    expect(asked.every((a) => a.includes("n"))).toBe(true);
    // back at another range: a candidate again; the node still gone stays avoided
    at = { start: 3, end: 6 };
    expect((await lease).route.name).toBe("m+n");
    expect(asked.at(-1)).toEqual(["gone"]);
  });

  it("a tracker that refuses otherwise is the answer at once", async () => {
    const bad = new ConnectError("unknown model artifact", Code.NotFound);
    const t = tracker(bad, Infinity);
    await expect(gate(t).acquire("k", new AbortController().signal)).rejects.toBe(bad);
    expect(t.calls()).toBe(1);
  });
});
